#pragma once
// The x86-64 instruction sets our CPU kernels have variants for, detected at run time so that one
// binary runs on any x86-64 and uses the widest vectors the machine offers. Tests force each
// variant the machine supports and compare it with the plain reference.
#include <optional>
#include <string_view>

namespace switchyard::cpu {

enum class Isa {
  scalar,  // portable C++, any CPU
  avx2,    // AVX2 + FMA + F16C (Haswell and later, Zen)
  avx512,  // AVX-512 F/BW/VL (Skylake-SP and later, Zen 4)
  avx512bf16,  // and AVX512-BF16 and VNNI (Cooper Lake, Zen 4): block types' prefill on bf16 dot products
  amx,     // avx512bf16 and AMX tiles with bf16 products (Sapphire Rapids and later), enabled by the OS
};
// Every variant, narrowest first.
inline constexpr Isa kAllIsas[] = {Isa::scalar, Isa::avx2, Isa::avx512, Isa::avx512bf16, Isa::amx};

const char* isa_name(Isa isa);
// Whether this CPU (and OS, for the wider register state) can run the variant.
bool isa_supported(Isa isa);
// The widest supported variant.
Isa best_isa();
// What the kernels use: best_isa() unless choose_isa() picked another.
Isa chosen_isa();
// The kernels use `isa` from now on, process-wide (`--cpu_kernels`: f32 activations on an AMX
// machine, or a narrower variant to compare). Throws std::invalid_argument when this CPU cannot run it.
void choose_isa(Isa isa);
// The variant called `name` (isa_name's spelling), or none.
std::optional<Isa> isa_named(std::string_view name);

namespace detail {
// Single extensions the variants' kernels pick their paths by (each read from CPUID once): AVX-512
// VNNI's byte products (the quantised decode: AVX2's on AVX-512 CPUs without them), and
// AVX512-BF16's conversions and dot products (the tiles path's one-pass bf16 panels).
bool has_avx512_vnni();
bool has_avx512_bf16();
}  // namespace detail

}  // namespace switchyard::cpu
