#pragma once
// bf16 and f16 <-> f32 conversions for the kernels: core/half_float.h's, by the kernels' names.
#include "core/half_float.h"

namespace switchyard::cpu {

// The conversions live in core (core/half_float.h); the kernels keep calling them by these names.
using switchyard::bf16_to_f32;
using switchyard::f16_to_f32;
using switchyard::f32_to_bf16;
using switchyard::f32_to_f16;
using switchyard::widen_to_f32;

}  // namespace switchyard::cpu
