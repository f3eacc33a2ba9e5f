#include "operators/causal_lm.h"

#include <unistd.h>

#include <cstring>

#include "core/error.h"
#include "core/units.h"
#include "operators/cpu/half.h"

namespace switchyard {
namespace {

// The caches are allocated up front (f32); refuse a --max_context whose caches cannot fit in this
// machine's memory with a message that says so, rather than failing inside an allocation.
void check_kv_cache_fits(const ModelConfig& config, std::int64_t max_context) {
  if (max_context <= 0) throw InputError("--max_context must be at least 1 token");
  const double bytes = static_cast<double>(config.kv_cache_bytes_per_token_per_layer(sizeof(float))) *
                       static_cast<double>(max_context) * config.num_hidden_layers;
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (physical > 0 && bytes > physical)
    throw InputError("a KV cache of " + format_bytes(static_cast<std::uint64_t>(bytes)) + " for --max_context " +
                     std::to_string(max_context) + " does not fit this machine's " +
                     format_bytes(static_cast<std::uint64_t>(physical)) + " of memory; lower --max_context");
}

}  // namespace

DecoderLayer::DecoderLayer(const BuildContext& context, const Module& layer)
    : tracer_(context.tracer), layer_(layer.layer), hidden_size_(context.tree.config().hidden_size) {
  const float eps = static_cast<float>(context.tree.config().rms_norm_eps);
  input_norm_ = NormOp(context, context.child(layer, "input_layernorm"), eps);
  post_attention_norm_ = NormOp(context, context.child(layer, "post_attention_layernorm"), eps);
  attention_ = make_attention(context, context.child(layer, "self_attn"));
  const bool mixtral = context.tree.config().arch == Architecture::mixtral;
  const Module& mlp = context.child(layer, mixtral ? "block_sparse_moe" : "mlp");
  moe_ = mlp.cls->role == ModuleRole::moe;
  feed_forward_ = make_feed_forward(context, mlp);
}

void DecoderLayer::forward(float* hidden, std::int64_t tokens, std::int64_t position) {
  const auto n = static_cast<std::size_t>(tokens * hidden_size_);
  std::vector<float> normed(n), delta(n);
  input_norm_.forward(hidden, tokens, normed.data());
  {
    const Tracer::Scope scope(tracer_, Region::self_attention, layer_);
    attention_->forward(normed.data(), tokens, position, delta.data());
  }
  for (std::size_t i = 0; i < n; ++i) hidden[i] += delta[i];
  post_attention_norm_.forward(hidden, tokens, normed.data());
  {
    // A MoE block times its own parts (gate, routed and shared experts).
    const Tracer::Scope scope(moe_ ? nullptr : tracer_, Region::dense_mlp, layer_);
    feed_forward_->forward(normed.data(), tokens, delta.data());
  }
  for (std::size_t i = 0; i < n; ++i) hidden[i] += delta[i];
}

CausalLM::CausalLM(const BuildContext& context)
    : tracer_(context.tracer), vocab_(context.tree.config().vocab_size), hidden_(context.tree.config().hidden_size),
      max_context_(context.max_context) {
  const ModuleTree& tree = context.tree;
  check_kv_cache_fits(tree.config(), context.max_context);
  const Module& root = tree.at(0);
  const Module& model = context.child(root, "model");
  const Module& embed = context.child(model, "embed_tokens");
  context.require_cpu(embed);
  embedding_ = context.param(embed, "weight", {DType::f32, DType::bf16, DType::f16});
  for (int layer : context.child(model, "layers").children)
    layers_.push_back(std::make_unique<DecoderLayer>(context, tree.at(layer)));
  final_norm_ = NormOp(context, context.child(model, "norm"), static_cast<float>(tree.config().rms_norm_eps));
  const Module& head = context.child(root, "lm_head");
  if (tree.config().tie_word_embeddings)
    throw InputError(tree.config().source + ": tie_word_embeddings is not supported yet");
  lm_head_ = LinearOp(context, head);
}

std::size_t CausalLM::kv_cache_bytes() const {
  std::size_t total = 0;
  for (const auto& layer : layers_) total += layer->attention().cache_bytes();
  return total;
}

std::vector<float> CausalLM::forward(std::span<const std::int32_t> ids, std::int64_t position, bool all_logits) {
  const auto tokens = static_cast<std::int64_t>(ids.size());
  std::vector<float> hidden(static_cast<std::size_t>(tokens * hidden_));
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int32_t id = ids[static_cast<std::size_t>(t)];
    if (id < 0 || id >= vocab_)
      throw InputError("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab_) + ")");
    const Tensor row = embedding_.rows(id, 1);
    cpu::widen_to_f32(row.dtype(), row.data(), static_cast<std::size_t>(hidden_), hidden.data() + t * hidden_);
  }
  for (auto& layer : layers_) layer->forward(hidden.data(), tokens, position);
  const std::int64_t first = all_logits ? 0 : tokens - 1;
  const std::int64_t rows = tokens - first;
  std::vector<float> normed(static_cast<std::size_t>(rows * hidden_));
  final_norm_.forward(hidden.data() + first * hidden_, rows, normed.data());
  std::vector<float> logits(static_cast<std::size_t>(rows * vocab_));
  const Tracer::Scope scope(tracer_, Region::lm_head);
  lm_head_.forward(normed.data(), rows, logits.data());
  return logits;
}

}  // namespace switchyard
