#pragma once
// Implementations: what actually runs a placed module in one phase. A rule chooses one through
// its replacement class, its op (generate_op / prefill_op) and its device; the registry
// (placement/operator_registry.cpp) states for every class and op which implementation that is, so
// names that share one (KLinearMarlin and VLinearMarlin) say so there, in one place.
// The walk resolves every module's implementations once (PlacementPlan::implementation); operators/
// holds one builder per implementation and builds each placed module by the plan's answer.
#include <span>
#include <string_view>

namespace switchyard {

struct PlacementPlan;

enum class Implementation {
  none,           // no code of its own: its parts are built by their own placements (layers, lists)
  embedding,      // table lookup (CPU rows, or gathered by the GPU's decode graph)
  rotary,         // RoPE tables, applied inside the attention that owns them
  decoder_stack,  // the decoder layers in order, moving the hidden state by the transfer_map
  linear_cpu,
  linear_gpu,         // on floats: bf16 / f32 as stored, ggml blocks dequantized to bf16 at load
  linear_gpu_quant,   // on what the file stores: ggml blocks kept in GPU memory and decoded inside the
                      // GEMV (prefill: bounded chunks dequantized per call); floats as linear_gpu
  rms_norm_cpu,
  rms_norm_gpu,
  mlp_cpu,        // SwiGLU MLP: dense layers, shared experts
  mlp_gpu,
  gate_cpu,       // MoE router: scores and top-k
  gate_gpu,
  experts_cpu,    // all routed experts of a layer, CPU kernels (AVX2 / AVX-512 / AMX)
  experts_gpu,    // all routed experts of a layer, GPU gemv (decode) and grouped GEMM (prefill); ggml
                  // blocks dequantized to bf16 at load
  experts_gpu_quant,  // the same on what the file stores: ggml blocks kept in GPU memory, decoded inside
                      // the decode kernels (prefill: each used expert dequantized per call); floats as
                      // experts_gpu
  moe_cpu,        // MoE block on the CPU: gate, routed and shared experts
  moe_gpu,        // MoE block on a GPU: gate and shared experts there, routed experts where placed
  mla_cpu,        // multi-head latent attention
  mla_gpu,
  gqa_cpu,        // grouped-query attention
  gqa_gpu,
};

// "experts.cpu", "mla.gpu", "none": the name reports and error messages use.
const char* implementation_name(Implementation implementation);
// Every implementation, in declaration order (for tests and for listing builders).
std::span<const Implementation> all_implementations();

struct PhaseImplementations {
  Implementation generate = Implementation::none;
  Implementation prefill = Implementation::none;
  bool operator==(const PhaseImplementations&) const = default;
};

// What runs `module` in decode and in prefill under `plan`: the implementation that the operator
// and ops of the placement owning its weights give on that placement's device, per phase. A module
// placed with the `default` class gets the native implementation of its module class (the
// operator whose native spelling replaces that class: DeepseekV3Attention -> MLA).
PhaseImplementations implementation_of(const PlacementPlan& plan, int module);

}  // namespace switchyard
