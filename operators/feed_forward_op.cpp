#include "operators/feed_forward_op.h"

#include <algorithm>

#include "core/error.h"
#include "operators/activations.h"
#include "operators/cpu/linear.h"
#include "operators/cpu/silu_and_mul.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/gemv.h"
#include "operators/gpu_runtime.h"
#endif

namespace switchyard {
namespace {

// Values below which a row-wise loop (gather, SiLU, weighted add) runs on one thread: a parallel
// region costs a few microseconds.
constexpr std::int64_t kMinParallelRowWork = 1 << 15;

}  // namespace

ExpertNames expert_names(const ModelConfig& config) {
  if (config.arch == Architecture::mixtral) return {"w1", "w3", "w2"};
  return {"gate_proj", "up_proj", "down_proj"};
}

cpu::MoeGateConfig gate_config(const ModelConfig& c, const float* bias) {
  switch (c.arch) {
    case Architecture::deepseek_v3:
      return cpu::deepseek_v3_gate(c.n_routed_experts, c.num_experts_per_tok, c.n_group, c.topk_group, bias,
                                   c.norm_topk_prob, static_cast<float>(c.routed_scaling_factor));
    case Architecture::deepseek_v2:
      return cpu::deepseek_v2_gate(c.n_routed_experts, c.num_experts_per_tok,
                                   c.topk_method == "group_limited_greedy" ? c.n_group : 0, c.topk_group,
                                   static_cast<float>(c.routed_scaling_factor));
    case Architecture::qwen3_moe: return cpu::qwen3_moe_gate(c.n_routed_experts, c.num_experts_per_tok, c.norm_topk_prob);
    case Architecture::mixtral: return cpu::mixtral_gate(c.n_routed_experts, c.num_experts_per_tok);
  }
  return {};
}

MlpOp::MlpOp(const BuildContext& context, const Module& mlp, const char* gate, const char* up, const char* down)
    : gate_(context, context.child(mlp, gate), context.device_of(mlp)),
      up_(context, context.child(mlp, up), context.device_of(mlp)),
      down_(context, context.child(mlp, down), context.device_of(mlp)) {
  for (const char* name : {gate, up, down}) require_same_device(context, mlp, context.child(mlp, name));
}

bool MlpOp::gate_up_fusable() const {
  return gate_.device_dtype() == up_.device_dtype() && !gate_.has_bias() && !up_.has_bias();
}

void MlpOp::forward(const float* x, std::int64_t tokens, float* out) {
  const std::int64_t width = gate_.out_features();
  GpuRuntime* gpu = gate_.gpu();
#if SWITCHYARD_HAVE_CUDA
  // Decode on a GPU: gate, up and SiLU-mul in one launch.
  if (gpu != nullptr && gate_up_fusable() &&
      cuda::gemv_swiglu_supports(tokens, gate_.in_features(), gate_.device_dtype(), gate_.device_weight(),
                                 up_.device_weight(), x)) {
    Scratch h(gpu, tokens * width, "an MLP's activations");
    cuda::gemv_swiglu(tokens, gate_.in_features(), width, gate_.device_weight(), up_.device_weight(),
                      gate_.device_dtype(), x, h, gpu->stream());
    down_.forward(h, tokens, out);
    return;
  }
#endif
  Scratch g(gpu, tokens * width, "an MLP's gate activations"), u(gpu, tokens * width, "an MLP's up activations");
  if (gpu == nullptr && !gate_.has_bias() && !up_.has_bias()) {
    // On the CPU, gate and up in one parallel region, sharing x's AMX tiles where it has them.
    const cpu::LinearCall calls[] = {gate_.cpu_call(x, tokens, g), up_.cpu_call(x, tokens, u)};
    cpu::linear_batch(calls);
  } else {
    gate_.forward(x, tokens, g);
    up_.forward(x, tokens, u);
  }
  silu_and_mul(gpu, g, u, tokens * width, g);
  down_.forward(g, tokens, out);
}

RoutedExperts::RoutedExperts(const BuildContext& context, const Module& experts) {
  const ExpertNames names = expert_names(context.tree.config());
  const Device cpu = Device::cpu();
  for (int e : experts.children) {
    const Module& expert = context.tree.at(e);
    experts_.push_back(Expert{LinearOp(context, context.child(expert, names.gate), cpu),
                              LinearOp(context, context.child(expert, names.up), cpu),
                              LinearOp(context, context.child(expert, names.down), cpu)});
    const Expert& added = experts_.back();
    // Both paths multiply the weights alone (cpu::linear on their rows), as no supported family has
    // expert biases; a checkpoint that has them is refused rather than run without them.
    if (added.gate.has_bias() || added.up.has_bias() || added.down.has_bias())
      throw InputError(std::string(expert.name) + ": routed experts with biases are not supported");
  }
  hidden_ = context.tree.config().hidden_size;
}

RoutedExperts::RoutedExperts(std::vector<Expert> experts) : experts_(std::move(experts)) {
  hidden_ = experts_.empty() ? 0 : experts_.front().gate.in_features();
}

void RoutedExperts::forward(const float* x, std::int64_t tokens, const std::int32_t* ids, const float* weights,
                            int top_k, float* out) const {
  if (tokens * top_k <= kFusedSlots) return forward_fused(x, tokens, ids, weights, top_k, out);
  // Rows grouped by expert, so each expert's weights are read once: slot s = token * top_k + k goes
  // to row row_of[s], expert e's rows from first[e] on.
  const std::int64_t slots = tokens * top_k;
  std::vector<std::int64_t> first(experts_.size() + 1, 0), row_of(static_cast<std::size_t>(slots));
  for (std::int64_t s = 0; s < slots; ++s) ++first[static_cast<std::size_t>(ids[s]) + 1];
  std::vector<std::int64_t> inter_first(experts_.size() + 1, 0);  // the same in the experts' widths
  for (std::size_t e = 0; e < experts_.size(); ++e) {
    inter_first[e + 1] = inter_first[e] + first[e + 1] * experts_[e].gate.out_features();
    first[e + 1] += first[e];
  }
  {
    std::vector<std::int64_t> filled(first.begin(), first.end() - 1);
    for (std::int64_t s = 0; s < slots; ++s) row_of[static_cast<std::size_t>(s)] = filled[static_cast<std::size_t>(ids[s])]++;
  }
  // Buffers kept between calls (a prefill's layers): fresh ones would fault in every page again.
  // The calling thread's; the parallel loops below use their addresses, not the (per-thread) names.
  thread_local std::vector<float> kept[4];
  kept[0].resize(static_cast<std::size_t>(slots * hidden_));
  kept[1].resize(kept[0].size());
  kept[2].resize(static_cast<std::size_t>(inter_first.back()));
  kept[3].resize(kept[2].size());
  float *const xs = kept[0].data(), *const y = kept[1].data(), *const g = kept[2].data(), *const u = kept[3].data();
  // The row-wise steps around the projections run parallel too: with the projections on AMX tiles,
  // serial ones held the cores idle for a fifth of the prefill (docs/perf-notes.md S12-8).
  const bool parallel = slots * hidden_ >= kMinParallelRowWork;
#pragma omp parallel for if (parallel)
  for (std::int64_t s = 0; s < slots; ++s)
    std::copy_n(x + s / top_k * hidden_, hidden_, xs + row_of[static_cast<std::size_t>(s)] * hidden_);
  // Every expert's gate and up projections in one batch (one fork-join; gate and up share x's
  // rounded tiles on AMX), then every down projection in another.
  std::vector<cpu::LinearCall> calls;
  for (std::size_t e = 0; e < experts_.size(); ++e) {
    const std::int64_t n = first[e + 1] - first[e];
    if (n == 0) continue;
    const Expert& expert = experts_[e];
    const float* xe = xs + first[e] * hidden_;
    calls.push_back(expert.gate.cpu_call(xe, n, g + inter_first[e]));
    calls.push_back(expert.up.cpu_call(xe, n, u + inter_first[e]));
  }
  cpu::linear_batch(calls);
#pragma omp parallel for if (parallel)
  for (std::size_t e = 0; e < experts_.size(); ++e)
    cpu::silu_and_mul(g + inter_first[e], u + inter_first[e], inter_first[e + 1] - inter_first[e], g + inter_first[e]);
  calls.clear();
  for (std::size_t e = 0; e < experts_.size(); ++e) {
    const std::int64_t n = first[e + 1] - first[e];
    if (n == 0) continue;
    calls.push_back(experts_[e].down.cpu_call(g + inter_first[e], n, y + first[e] * hidden_));
  }
  cpu::linear_batch(calls);
  // Each token's rows in slot order, as forward_fused adds them.
#pragma omp parallel for if (parallel)
  for (std::int64_t t = 0; t < tokens; ++t) {
    float* row = out + t * hidden_;
    std::fill(row, row + hidden_, 0.0f);
    for (std::int64_t s = t * top_k; s < (t + 1) * top_k; ++s) {
      const float w = weights[s];
      const float* ys = y + row_of[static_cast<std::size_t>(s)] * hidden_;
      for (std::int64_t i = 0; i < hidden_; ++i) row[i] += w * ys[i];
    }
  }
}

void RoutedExperts::forward_fused(const float* x, std::int64_t tokens, const std::int32_t* ids, const float* weights,
                                  int top_k, float* out) const {
  // One parallel region for the whole layer: threads share out the rows of every selected
  // expert's gate and up projections, then (after the barrier) of the down projections. A
  // projection per fork-join would cost 3 * top_k of them per token; the weights are streamed
  // once either way, and cpu::linear runs on the calling thread inside the region.
  // Items go to threads as they ask (dynamic): each phase ends when its last item does, and with
  // a static split one slow or preempted core held up every layer (hybrid V2-Lite decode 37.8
  // against 31.5 ms a token, docs/perf-notes.md S11-2). 32 rows an item: 16 were slower (S11-3).
  constexpr std::int64_t kRows = 32;
  const std::int64_t slots = tokens * top_k;
  const std::int64_t inter = experts_.front().gate.out_features();
  const std::int64_t up_items = (inter + kRows - 1) / kRows, down_items = (hidden_ + kRows - 1) / kRows;
  std::vector<float> h(static_cast<std::size_t>(slots * inter)), y(static_cast<std::size_t>(slots * hidden_));
  // Row `first` of a [rows, in] weight (plain dtypes: row-major, whole elements).
  auto row = [](const Tensor& w, std::int64_t first) {
    return static_cast<const char*>(w.data()) +
           storage_bytes(w.dtype(), static_cast<std::uint64_t>(first * w.dim(1)));
  };
#pragma omp parallel
  {
    float g[kRows], u[kRows];
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t item = 0; item < slots * up_items; ++item) {
      const std::int64_t slot = item / up_items, first = item % up_items * kRows;
      const std::int64_t rows = std::min(kRows, inter - first);
      const Expert& e = experts_[static_cast<std::size_t>(ids[slot])];
      const float* xs = x + slot / top_k * hidden_;
      cpu::linear(xs, 1, hidden_, row(e.gate.weight(), first), e.gate.weight().dtype(), rows, g);
      cpu::linear(xs, 1, hidden_, row(e.up.weight(), first), e.up.weight().dtype(), rows, u);
      cpu::silu_and_mul(g, u, rows, h.data() + slot * inter + first);
    }
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t item = 0; item < slots * down_items; ++item) {
      const std::int64_t slot = item / down_items, first = item % down_items * kRows;
      const std::int64_t rows = std::min(kRows, hidden_ - first);
      const Tensor& down = experts_[static_cast<std::size_t>(ids[slot])].down.weight();
      cpu::linear(h.data() + slot * inter, 1, inter, row(down, first), down.dtype(), rows,
                  y.data() + slot * hidden_ + first);
    }
  }
  // In slot order, as the grouped path adds them.
  std::fill(out, out + tokens * hidden_, 0.0f);
  for (std::int64_t slot = 0; slot < slots; ++slot) {
    float* row = out + slot / top_k * hidden_;
    const float w = weights[slot];
    const float* ys = y.data() + slot * hidden_;
    for (std::int64_t i = 0; i < hidden_; ++i) row[i] += w * ys[i];
  }
}

MoeOp::MoeOp(const BuildContext& context, const Module& moe)
    : tracer_(context.tracer),
      layer_(moe.layer),
      router_(context, context.child(moe, "gate"), Device::cpu()),
      experts_(context, context.child(moe, "experts")) {
  const ModelConfig& c = context.tree.config();
  require_same_device(context, moe, context.child(moe, "gate"));
  const Module& experts = context.child(moe, "experts");
  const PhaseImplementations routed = context.implementation(experts);
  for (const Implementation implementation : {routed.generate, routed.prefill})
    if (implementation != Implementation::experts_cpu)
      throw InputError("the profile runs " + std::string(moe.name) + " on the CPU but its routed experts as " +
                       implementation_name(implementation) + " on " +
                       (implementation == routed.generate ? context.generate_device(experts)
                                                          : context.prefill_device(experts))
                           .str() +
                       "; a MoE block on the CPU runs its experts there too (experts.cpu)");
  context.record(experts, routed);
  const Module& gate = context.child(moe, "gate");
  for (const Parameter& p : gate.params)
    if (p.name == "e_score_correction_bias") correction_bias_ = context.param_f32(gate, "e_score_correction_bias");
  gate_ = gate_config(c, correction_bias_.empty() ? nullptr : correction_bias_.data());
  for (int child : moe.children)
    if (context.tree.at(child).local_name() == "shared_experts")
      shared_ = std::make_unique<MlpOp>(context, context.tree.at(child));
}

void MoeOp::forward(const float* x, std::int64_t tokens, float* out) {
  const int top_k = gate_.top_k;
  std::vector<float> logits(static_cast<std::size_t>(tokens * gate_.n_experts));
  std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens * top_k));
  std::vector<float> weights(ids.size());
  {
    const Tracer::Scope scope(tracer_, Region::moe_gate, layer_);
    router_.forward(x, tokens, logits.data());
    cpu::moe_gate(gate_, logits.data(), tokens, ids.data(), weights.data());
  }
  {
    const Tracer::Scope scope(tracer_, Region::routed_experts, layer_);
    experts_.forward(x, tokens, ids.data(), weights.data(), top_k, out);
  }
  if (!shared_) return;
  const Tracer::Scope scope(tracer_, Region::shared_experts, layer_);
  std::vector<float> shared(static_cast<std::size_t>(tokens * router_.in_features()));
  shared_->forward(x, tokens, shared.data());
  for (std::size_t i = 0; i < shared.size(); ++i) out[i] += shared[i];
}

void require_same_device(const BuildContext& context, const Module& block, const Module& part) {
  const Device outer = context.device_of(block), inner = context.device_of(part);
  if (outer == inner) return;
  throw InputError("the profile runs " + std::string(block.name) + " on " + outer.str() + " but " +
                   std::string(part.name) + " on " + inner.str() +
                   "; the parts of an attention or MLP block run where the block does (only routed experts may "
                   "differ)");
}

}  // namespace switchyard
