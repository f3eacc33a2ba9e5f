#include "operators/cpu/isa.h"

namespace switchyard::cpu {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "unknown";
}

// __builtin_cpu_supports reads CPUID and, for AVX/AVX-512, whether the OS saves those registers.
bool isa_supported(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && isa_supported(Isa::avx2);
  }
  return false;
#else
  return isa == Isa::scalar;
#endif
}

Isa best_isa() {
  static const Isa best = isa_supported(Isa::avx512) ? Isa::avx512 : isa_supported(Isa::avx2) ? Isa::avx2 : Isa::scalar;
  return best;
}

}  // namespace switchyard::cpu
