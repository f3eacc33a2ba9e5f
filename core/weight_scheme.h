#pragma once
// What a checkpoint stores each tensor as, when there is no checkpoint to read (--weight_dtype).
// A scheme picks a dtype per tensor kind and layer, the way real files of that name are made:
// DeepSeek's FP8 release keeps embeddings, norms and the router in higher precision and adds a
// 128x128-block scale per FP8 matrix; llama.cpp's Q4_K_M spends Q6_K on the output and on some
// layers' down projections.
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace switchyard {

enum class TensorKind : std::uint8_t {
  embedding,       // model.embed_tokens.weight
  output,          // lm_head.weight
  norm,            // RMSNorm weights
  attention,       // attention projections
  dense_mlp,       // dense MLP of non-MoE layers
  shared_expert,   // shared experts of a MoE block
  expert_gate_up,  // routed experts' gate/up (w1/w3)
  expert_down,     // routed experts' down (w2)
  router,          // MoE gate weight
  router_bias,     // e_score_correction_bias
  bias,            // Linear biases (attention_bias: q/k/v_proj)
  block_scale,     // FP8 weight_scale_inv
};

struct WeightScheme {
  std::string name;
  std::string description;
  // `layer` is the decoder layer the tensor belongs to, -1 outside the layers.
  DType (*dtype_for)(TensorKind kind, int layer, int num_layers);
  bool fp8_block_scales = false;  // adds `weight_scale_inv` (f32, one per 128x128 block) per FP8 matrix
};

const WeightScheme* find_weight_scheme(std::string_view name);
std::vector<std::string> weight_scheme_names();
// The schemes make-model writes as a GGUF: every one but DeepSeek's FP8 release and the lattice IQ
// types, which llama.cpp's quantizer writes (the schemes still describe such files for check).
std::vector<std::string> gguf_weight_scheme_names();

}  // namespace switchyard
