// The CPU-variant detection (operators/cpu/kernels/isa.h) against the kernel's own account of the CPU:
// Linux lists in /proc/cpuinfo the features it found in CPUID and whose register state it saves,
// which is what isa_supported must agree with for the AVX2 and AVX-512 variants.
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

#include "operators/cpu/kernels/isa.h"

namespace {

// The "flags" line of the first processor, as a set of words; empty when there is none.
std::set<std::string> cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream words(line.substr(colon + 1));
    std::set<std::string> flags;
    for (std::string word; words >> word;) flags.insert(word);
    return flags;
  }
  return {};
}

}  // namespace

TEST_CASE("isa_supported agrees with the flags Linux lists in /proc/cpuinfo") {
  using switchyard::cpu::Isa;
  using switchyard::cpu::isa_supported;
#if !defined(__x86_64__)
  MESSAGE("skipped: not x86-64");
  return;
#endif
  const std::set<std::string> flags = cpuinfo_flags();
  if (flags.empty()) {
    MESSAGE("skipped: no flags line in /proc/cpuinfo");
    return;
  }
  const auto has = [&](const char* flag) { return flags.count(flag) == 1; };
  INFO("/proc/cpuinfo: avx2 " << has("avx2") << ", fma " << has("fma") << ", f16c " << has("f16c") << ", avx512f "
                              << has("avx512f") << ", avx512bw " << has("avx512bw") << ", avx512vl " << has("avx512vl"));
  CHECK(isa_supported(Isa::scalar));
  const bool avx2 = has("avx2") && has("fma") && has("f16c");
  CHECK(isa_supported(Isa::avx2) == avx2);
  CHECK(isa_supported(Isa::avx512) == (avx2 && has("avx512f") && has("avx512bw") && has("avx512vl")));
  CHECK(isa_supported(Isa::avx512bf16) ==
        (isa_supported(Isa::avx512) && has("avx512_bf16") && has("avx512_vnni")));
  if (isa_supported(Isa::amx)) CHECK((has("amx_tile") && has("amx_bf16")));
}
