#include "operators/cpu/kernels/isa.h"

#include <atomic>
#include <stdexcept>
#include <string>


#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace switchyard::cpu {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::avx512bf16: return "avx512bf16";
    case Isa::amx: return "amx";
  }
  return "unknown";
}

#if defined(__x86_64__) || defined(__i386__)
namespace {
// F16C in CPUID leaf 1 (ECX bit 29), and the OS saving the YMM registers it works on: OSXSAVE
// (ECX bit 27) and XCR0's SSE and AVX state bits (1 and 2). This is what GCC's
// __builtin_cpu_supports("f16c") tests; clang 14 has no "f16c" there, so we read CPUID ourselves.
bool f16c_enabled() {
  // Read once: linear() asks isa_supported on every call, and under a hypervisor each CPUID
  // exits to it (about a microsecond).
  static const bool enabled = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid(1, &a, &b, &c, &d) == 0) return false;
    const bool f16c = (c >> 29) & 1u, osxsave = (c >> 27) & 1u;
    if (!f16c || !osxsave) return false;
    unsigned xcr0_low = 0, xcr0_high = 0;
    __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));  // XCR0; xgetbv is legal once OSXSAVE is set
    constexpr unsigned kSseAndAvxState = 0x6;
    return (xcr0_low & kSseAndAvxState) == kSseAndAvxState;
  }();
  return enabled;
}
}  // namespace
#endif

#if defined(__x86_64__)
namespace {
// AMX-TILE and AMX-BF16 in CPUID, and Linux's permission for this process to use the tile data
// (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA: refused by kernels before 5.16 or without AMX).
bool amx_enabled() {
  static const bool enabled = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
    const bool tile = (d >> 24) & 1u, bf16 = (d >> 22) & 1u;
    constexpr long kRequestPermission = 0x1023, kTileData = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
    return tile && bf16 && syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
  }();
  return enabled;
}
}  // namespace
#endif

namespace detail {

bool has_avx512_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  // CPUID leaf 7, sub-leaf 1: EAX bit 5 is AVX512_BF16 (GCC's and clang's __builtin_cpu_supports
  // disagree on its name); the AVX-512 state must be enabled too, which avx512f's check covers.
  static const bool bf16 = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0, nullptr) < 7) return false;
    __cpuid_count(7, 1, a, b, c, d);
    return ((a >> 5) & 1u) != 0 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  }();
  return bf16;
#else
  return false;
#endif
}

bool has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl");
  return vnni;
#else
  return false;
#endif
}

}  // namespace detail

// __builtin_cpu_supports reads CPUID and, for AVX/AVX-512, whether the OS saves those registers;
// GCC and clang agree on the names used here (F16C is read by f16c_enabled).
bool isa_supported(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c_enabled();
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && isa_supported(Isa::avx2);
    case Isa::avx512bf16:
      return isa_supported(Isa::avx512) && detail::has_avx512_bf16() && detail::has_avx512_vnni();
    case Isa::amx:
#if defined(__x86_64__)
      // The tiles path writes its panels with AVX512-BF16 and decodes with VNNI: every AMX CPU has both.
      return isa_supported(Isa::avx512bf16) && amx_enabled();
#else
      return false;
#endif
  }
  return false;
#else
  return isa == Isa::scalar;
#endif
}

Isa best_isa() {
  static const Isa best = isa_supported(Isa::amx)          ? Isa::amx
                          : isa_supported(Isa::avx512bf16) ? Isa::avx512bf16
                          : isa_supported(Isa::avx512)     ? Isa::avx512
                          : isa_supported(Isa::avx2)   ? Isa::avx2
                                                       : Isa::scalar;
  return best;
}

namespace {
constexpr int kNoChoice = -1;
std::atomic<int> choice{kNoChoice};
}  // namespace

Isa chosen_isa() {
  const int chosen = choice.load(std::memory_order_relaxed);
  return chosen == kNoChoice ? best_isa() : static_cast<Isa>(chosen);
}

void choose_isa(Isa isa) {
  if (!isa_supported(isa)) throw std::invalid_argument(std::string("this CPU cannot run the ") + isa_name(isa) + " kernels");
  choice.store(static_cast<int>(isa), std::memory_order_relaxed);
}

std::optional<Isa> isa_named(std::string_view name) {
  for (Isa isa : kAllIsas)
    if (name == isa_name(isa)) return isa;
  return std::nullopt;
}

}  // namespace switchyard::cpu
