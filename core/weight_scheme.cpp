#include "core/weight_scheme.h"

#include <array>

#include "core/quant_formats.h"
#include "core/text.h"

namespace switchyard {
namespace {

bool is_matrix(TensorKind kind) {
  return kind != TensorKind::norm && kind != TensorKind::router_bias && kind != TensorKind::block_scale &&
         kind != TensorKind::bias;
}

// llama.cpp's quantizer keeps the router (ffn_gate_inp) in f32 whatever the type, as it keeps
// every one-dimensional tensor: the experts a token picks must not move with the rounding.
DType uniform(TensorKind kind, DType matrix_type) {
  return is_matrix(kind) && kind != TensorKind::router ? matrix_type : DType::f32;
}

// llama.cpp gives more bits to the first and last eighth of the layers and every third in between.
bool uses_more_bits(int layer, int num_layers) {
  if (layer < 0 || num_layers <= 0) return false;
  return layer < num_layers / 8 || layer >= 7 * num_layers / 8 || (layer - num_layers / 8) % 3 == 2;
}

DType k_quant(TensorKind kind, int layer, int num_layers, DType base, DType more_bits) {
  switch (kind) {
    case TensorKind::norm:
    case TensorKind::router_bias:
    case TensorKind::bias:
    case TensorKind::block_scale: return DType::f32;
    case TensorKind::output: return DType::q6_k;
    case TensorKind::router: return DType::f32;
    case TensorKind::expert_down:
    case TensorKind::dense_mlp:
      return uses_more_bits(layer, num_layers) ? more_bits : base;
    default: return base;
  }
}

constexpr int kSchemeCount = 26;
const std::array<WeightScheme, kSchemeCount>& schemes() {
  static const std::array<WeightScheme, kSchemeCount> table = {{
      {"bf16", "bfloat16 everywhere (HF release dtype); e_score_correction_bias in f32",
       [](TensorKind k, int, int) { return k == TensorKind::router_bias ? DType::f32 : DType::bf16; }, false},
      {"f16", "float16 everywhere",
       [](TensorKind k, int, int) { return k == TensorKind::router_bias ? DType::f32 : DType::f16; }, false},
      {"f32", "float32 everywhere", [](TensorKind, int, int) { return DType::f32; }, false},
      {"fp8", "DeepSeek FP8 release: e4m3 projections with 128x128 block scales; embeddings, norms, router in bf16",
       [](TensorKind k, int, int) {
         switch (k) {
           case TensorKind::attention:
           case TensorKind::dense_mlp:
           case TensorKind::shared_expert:
           case TensorKind::expert_gate_up:
           case TensorKind::expert_down: return DType::f8_e4m3;
           case TensorKind::router_bias:
           case TensorKind::block_scale: return DType::f32;
           default: return DType::bf16;
         }
       },
       true},
      {"q8_0", "GGUF Q8_0 matrices, f32 norms", [](TensorKind k, int, int) { return uniform(k, DType::q8_0); }, false},
      {"q6_k", "GGUF Q6_K matrices, f32 norms", [](TensorKind k, int, int) { return uniform(k, DType::q6_k); }, false},
      {"q5_k", "GGUF Q5_K matrices, f32 norms", [](TensorKind k, int, int) { return uniform(k, DType::q5_k); }, false},
      {"q4_k", "GGUF Q4_K matrices, f32 norms", [](TensorKind k, int, int) { return uniform(k, DType::q4_k); }, false},
      {"q3_k", "GGUF Q3_K matrices, f32 norms", [](TensorKind k, int, int) { return uniform(k, DType::q3_k); }, false},
      {"q5_1", "GGUF Q5_1 matrices, f32 norms", [](TensorKind k, int, int) { return uniform(k, DType::q5_1); }, false},
      {"q5_0", "GGUF Q5_0 matrices, f32 norms", [](TensorKind k, int, int) { return uniform(k, DType::q5_0); }, false},
      {"q4_1", "GGUF Q4_1 matrices, f32 norms", [](TensorKind k, int, int) { return uniform(k, DType::q4_1); }, false},
      {"q4_0", "GGUF Q4_0 matrices, f32 norms", [](TensorKind k, int, int) { return uniform(k, DType::q4_0); }, false},
      {"q5_k_m", "GGUF Q5_K_M mix (Q5_K, Q6_K for output and some down projections)",
       [](TensorKind k, int l, int n) { return k_quant(k, l, n, DType::q5_k, DType::q6_k); }, false},
      {"q4_k_m", "GGUF Q4_K_M mix (Q4_K, Q6_K for output and some down projections)",
       [](TensorKind k, int l, int n) { return k_quant(k, l, n, DType::q4_k, DType::q6_k); }, false},
      {"q2_k", "GGUF Q2_K mix (Q2_K, Q3_K for some down projections, Q6_K output)",
       [](TensorKind k, int l, int n) { return k_quant(k, l, n, DType::q2_k, DType::q3_k); }, false},
      {"iq4_xs", "GGUF IQ4_XS matrices (IQ4_NL where a row is not whole 256-weight blocks), f32 norms",
       [](TensorKind k, int, int) { return uniform(k, DType::iq4_xs); }, false},
      {"iq4_nl", "GGUF IQ4_NL matrices, f32 norms", [](TensorKind k, int, int) { return uniform(k, DType::iq4_nl); }, false},
      {"iq3_s", "GGUF IQ3_S matrices, f32 norms (check and --fit only: llama-quantize writes it)",
       [](TensorKind k, int, int) { return uniform(k, DType::iq3_s); }, false},
      {"iq3_xxs", "GGUF IQ3_XXS matrices, f32 norms (check and --fit only: llama-quantize writes it)",
       [](TensorKind k, int, int) { return uniform(k, DType::iq3_xxs); }, false},
      {"iq2_s", "GGUF IQ2_S matrices, f32 norms (check and --fit only: llama-quantize writes it)",
       [](TensorKind k, int, int) { return uniform(k, DType::iq2_s); }, false},
      {"iq2_xs", "GGUF IQ2_XS matrices, f32 norms (check and --fit only: llama-quantize writes it)",
       [](TensorKind k, int, int) { return uniform(k, DType::iq2_xs); }, false},
      {"iq2_xxs", "GGUF IQ2_XXS matrices, f32 norms (check and --fit only: llama-quantize writes it)",
       [](TensorKind k, int, int) { return uniform(k, DType::iq2_xxs); }, false},
      {"iq1_m", "GGUF IQ1_M matrices, f32 norms (check and --fit only: llama-quantize writes it)",
       [](TensorKind k, int, int) { return uniform(k, DType::iq1_m); }, false},
      {"iq1_s", "GGUF IQ1_S matrices, f32 norms (check and --fit only: llama-quantize writes it)",
       [](TensorKind k, int, int) { return uniform(k, DType::iq1_s); }, false},
      {"mxfp4", "GGUF MXFP4 routed experts, Q8_0 other matrices (llama.cpp's MXFP4_MOE), f32 norms",
       [](TensorKind k, int, int) {
         return k == TensorKind::expert_gate_up || k == TensorKind::expert_down ? DType::mxfp4 : uniform(k, DType::q8_0);
       },
       false},
  }};
  return table;
}

}  // namespace

const WeightScheme* find_weight_scheme(std::string_view name) {
  const std::string lower = to_lower(name);  // llama.cpp's users write Q4_K_M
  for (const WeightScheme& scheme : schemes())
    if (scheme.name == lower) return &scheme;
  return nullptr;
}

std::vector<std::string> gguf_weight_scheme_names() {
  std::vector<std::string> names;
  for (const WeightScheme& scheme : schemes())
    if (!scheme.fp8_block_scales && quant::has_encoder(scheme.dtype_for(TensorKind::expert_down, 0, 1)))
      names.push_back(scheme.name);
  return names;
}

std::vector<std::string> weight_scheme_names() {
  std::vector<std::string> names;
  for (const WeightScheme& scheme : schemes()) names.push_back(scheme.name);
  return names;
}

}  // namespace switchyard
