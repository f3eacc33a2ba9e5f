#include "operators/model/causal_lm.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "core/quant_formats.h"
#include "core/units.h"
#include "core/half_float.h"
#include "operators/cpu/kernels/sampling.h"
#include "operators/model/implementation_builders.h"
#include "operators/ops/activations.h"
#include "operators/ops/backend.h"

namespace switchyard {

namespace {

// The caches are allocated up front (BuildContext::kv_cache); refuse a --max_context whose caches
// cannot fit in this machine's memory with a message that says so, rather than failing inside an
// allocation.
void check_kv_cache_fits(const BuildContext& context) {
  const std::int64_t max_context = context.max_context;
  if (max_context <= 0) throw InputError("--max_context must be at least 1 token");
  const double bytes =
      static_cast<double>(context.kv_cache().bytes()) * context.tree.config().num_hidden_layers;
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (physical > 0 && bytes > physical)
    throw InputError("a KV cache of " + format_bytes(static_cast<std::uint64_t>(bytes)) + " for --max_context " +
                     std::to_string(max_context) + " does not fit this machine's " +
                     format_bytes(static_cast<std::uint64_t>(physical)) + " of memory; lower --max_context");
}

}  // namespace

CausalLM::CausalLM(const BuildContext& build, CausalLMOptions options)
    : tracer_(build.tracer),
      options_(options),
      vocab_(build.tree.config().vocab_size),
      hidden_(build.tree.config().hidden_size),
      max_context_(build.max_context) {
  if (options_.prefill_chunk <= 0) throw InputError("the prefill chunk must be at least 1 token");
  BuildContext context = build;
  runtimes_ = make_accelerators(options_.prefill_chunk, options_.device_map);
  context.runtimes = runtimes_.get();
  const ModuleTree& tree = context.tree;
  check_kv_cache_fits(context);
  const Module& root = tree.at(0);
  const Module& model = context.child(root, "model");
  const Module& embed = context.child(model, "embed_tokens");
  const std::uint64_t total_bytes = tree.subtree_bytes(0);
  std::uint64_t done_bytes = 0;
  auto progress = [&](int index) {
    done_bytes += tree.subtree_bytes(index);
    if (options_.on_progress) options_.on_progress(std::min(done_bytes, total_bytes), total_bytes);
  };
  embed_device_ = context.device_of(embed);
  // Floats, or (placement/weight_storage.h) the file's blocks, whose rows are decoded where they
  // are gathered: a bf16 copy of DeepSeek-V3's table would take 1.8 GB (and a decode graph's
  // page-locked copy of it as much again).
  if (const DType resident = context.resident_dtype(embed, "weight", embed_device_); is_block_quantized(resident))
    embedding_ = context.param(embed, "weight", {resident});
  else
    embedding_ = context.param(embed, "weight", {DType::f32, DType::bf16, DType::f16});
  progress(static_cast<int>(&embed - &tree.at(0)));  // modules are one vector: the index by address
  for (int layer : context.child(model, "layers").children) {
    layers_.push_back(std::make_unique<DecoderLayer>(context, tree.at(layer)));
    progress(layer);
  }
  const Module& head = context.child(root, "lm_head");
  if (tree.config().tie_word_embeddings)
    throw InputError(tree.config().source + ": tie_word_embeddings is not supported yet");
  final_device_ = context.device_of(head);
  final_norm_ = NormOp(context, context.child(model, "norm"), static_cast<float>(tree.config().rms_norm_eps), final_device_);
  lm_head_ = LinearOp(context, head, final_device_);
  if (options_.on_progress) options_.on_progress(total_bytes, total_bytes);
  head_runtime_ = context.gpu(final_device_);
  if (runtimes_ != nullptr && runtimes_->in_use()) {
    // One graph per decode step when the decoder stack and the head run on devices (the embedding
    // may be on the CPU: its row is the graph's input).
    std::set<Device> devices{final_device_};
    for (const auto& layer : layers_) {
      devices.insert(layer->attention_device());
      devices.insert(layer->feed_forward_device());
    }
    const bool on_devices = std::none_of(devices.begin(), devices.end(), [](Device d) { return d.is_cpu(); });
    StepsSetup setup;
    setup.embedding = &embedding_;
    setup.embed_device = embed_device_;
    setup.head_device = final_device_;
    setup.first_layer_device = layers_.empty() ? final_device_ : layers_.front()->attention_device();
    setup.vocab = vocab_;
    setup.hidden = hidden_;
    setup.graphs = options_.use_cuda_graph && on_devices && !layers_.empty() &&
                   (embed_device_.is_cpu() || devices.count(embed_device_) > 0);
    setup.tracer = tracer_;
    steps_ = runtimes_->make_steps(setup);
  }
  stream_ = std::make_unique<ResidualStream>(runtimes_.get(), options_.prefill_chunk, hidden_);
}

CausalLM::~CausalLM() {
  // The CPU-experts worker may hold jobs that point into the layers, which go first.
  if (runtimes_) runtimes_->shutdown();
}

std::size_t CausalLM::kv_cache_bytes() const {
  std::size_t total = 0;
  for (const auto& layer : layers_) total += layer->attention().cache_bytes();
  return total;
}

std::size_t CausalLM::kv_cache_bytes(Device device) const {
  std::size_t total = 0;
  for (const auto& layer : layers_)
    if (layer->attention_device() == device) total += layer->attention().cache_bytes();
  return total;
}

void CausalLM::skip_cpu_expert_work(bool skip) {
  if (runtimes_) runtimes_->skip_expert_work(skip);
}

void CausalLM::discard_decode_graph() {
  if (steps_) steps_->discard_graph();
}

std::optional<Device> CausalLM::graph_device() const {
  if (steps_) return steps_->graph_device();
  return std::nullopt;
}

std::size_t CausalLM::graph_gpus() const { return steps_ ? steps_->graph_devices() : 0; }

std::string CausalLM::placement_summary() const {
  std::map<std::string, std::vector<int>> attention, feed_forward;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    attention[layers_[l]->attention_device().str()].push_back(static_cast<int>(l));
    feed_forward[layers_[l]->feed_forward_device().str()].push_back(static_cast<int>(l));
  }
  auto list = [](const std::map<std::string, std::vector<int>>& by_device) {
    std::string out;
    for (const auto& [device, layers] : by_device) {
      if (!out.empty()) out += ", ";
      out += device + " (" + std::to_string(layers.size()) + " layers)";
    }
    return out;
  };
  std::string summary = "embedding " + embed_device_.str() + "; attention " + list(attention) + "; MLP/MoE blocks " +
                        list(feed_forward) + "; head " + final_device_.str();
  if (!options_.device_map.identity()) summary += "; GPUs folded by --device_map " + options_.device_map.str();
  return summary;
}

void CausalLM::check_token_ids(std::span<const std::int32_t> ids) const {
  for (const std::int32_t id : ids)
    if (id < 0 || id >= vocab_)
      throw InputError("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(vocab_) + ")");
}

std::vector<float> CausalLM::forward(std::span<const std::int32_t> ids, std::int64_t position, bool all_logits) {
  check_token_ids(ids);
  if (ids.empty()) throw std::logic_error("CausalLM::forward: no tokens");
  check_context(position, static_cast<std::int64_t>(ids.size()), max_context_);
  std::vector<float> logits;
  const auto total = static_cast<std::int64_t>(ids.size());
  for (std::int64_t first = 0; first < total; first += options_.prefill_chunk) {
    const std::int64_t count = std::min(options_.prefill_chunk, total - first);
    std::vector<float> part = run_chunk(ids.subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(count)),
                                        position + first, all_logits);
    if (all_logits) logits.insert(logits.end(), part.begin(), part.end());
    else logits = std::move(part);
  }
  return logits;
}

std::int32_t CausalLM::forward_greedy(std::span<const std::int32_t> ids, std::int64_t position) {
  if (steps_ && steps_->head_on_device()) {
    {
      const GreedyScope greedy(greedy_);
      forward(ids, position);
    }
    return steps_->greedy_id();
  }
  const std::vector<float> logits = forward(ids, position);
  return cpu::argmax(logits.data(), vocab_);
}

void CausalLM::prepare(std::span<const std::int32_t> ids, std::int64_t position) {
  const auto tokens = static_cast<std::int64_t>(ids.size());
  if (steps_) steps_->write_step(position, ids);
  if (!embed_device_.is_cpu()) return;
  float* hidden = stream_->start(Device::cpu(), tokens);
  for (std::int64_t t = 0; t < tokens; ++t) {
    const Tensor row = embedding_.rows(ids[static_cast<std::size_t>(t)], 1);
    if (is_block_quantized(row.dtype()))
      quant::dequantize_row(row.dtype(), row.data(), hidden + t * hidden_, hidden_);
    else
      widen_to_f32(row.dtype(), row.data(), static_cast<std::size_t>(hidden_), hidden + t * hidden_);
  }
}

void CausalLM::enqueue(std::span<const std::int32_t> ids, std::int64_t position, bool all_logits, bool capturing) {
  const auto tokens = static_cast<std::int64_t>(ids.size());
  struct EndPass {  // closes the device's step regions, also when queuing throws
    DeviceSteps* steps;
    ~EndPass() {
      if (steps != nullptr) steps->end_pass();
    }
  } const end_pass{steps_.get()};
  if (steps_) {
    steps_->begin_pass(tokens, capturing);
    if (const std::optional<Device> where = steps_->embedding_device(capturing)) {
      const CurrentDevice current(&runtimes_->get(*where));
      steps_->embed(stream_->start(*where, tokens), tokens, capturing);
    }
    steps_->begin_layers();
  }
  for (auto& layer : layers_) layer->forward(*stream_, tokens, position);
  if (steps_) steps_->begin_head();

  const std::int64_t rows = all_logits ? tokens : 1;
  float* hidden = stream_->on(final_device_) + (tokens - rows) * hidden_;
  const PendingDelta last_delta = stream_->take_delta();
  const CurrentDevice current(head_runtime_);
  Scratch normed(head_runtime_, rows * hidden_, "the final norm's output");
  // The last layer's output is added to the rows normed here only: nothing reads the others after.
  if (!last_delta.empty()) final_norm_.add_and_forward(hidden, last_delta.from_row(tokens - rows, hidden_), rows, normed);
  else final_norm_.forward(hidden, rows, normed);
  const WorkScope scope(head_runtime_, tracer_, Region::lm_head);
  if (head_runtime_ == nullptr) {
    logits_.resize(static_cast<std::size_t>(rows * vocab_));
    lm_head_.forward(normed, rows, logits_.data());
    return;
  }
  steps_->head(lm_head_, normed, rows, greedy_, capturing);
}

DeviceSteps::CaptureStep CausalLM::capture_step() {
  return [this](std::int32_t id, std::int64_t position) {
    enqueue(std::span(&id, 1), position, /*all_logits=*/false, /*capturing=*/true);
  };
}

std::vector<float> CausalLM::run_chunk(std::span<const std::int32_t> ids, std::int64_t position, bool all_logits) {
  const auto tokens = static_cast<std::int64_t>(ids.size());
  if (!steps_) {
    prepare(ids, position);
    enqueue(ids, position, all_logits);
    return logits_;
  }
  if (steps_->graphs() && tokens == 1 && !all_logits) return steps_->graph_step(ids[0], position, greedy_, capture_step());
  prepare(ids, position);
  steps_->run_pass([&] { enqueue(ids, position, all_logits); });
  if (!steps_->head_on_device()) return logits_;
  const std::int64_t rows = all_logits ? tokens : 1;
  if (greedy_ && rows == 1) return {};  // forward_greedy reads the id
  return steps_->logits(rows);
}

bool CausalLM::chains_decode_steps() const { return steps_ && steps_->chains(); }

int CausalLM::decode_greedy(std::int32_t id, std::int64_t position, int count,
                            const std::function<bool(std::int32_t)>& on_token) {
  if (count <= 0) return 0;
  if (chains_decode_steps()) {
    check_token_ids(std::span(&id, 1));
    check_context(position, count, max_context_);
    const GreedyScope greedy(greedy_);
    return steps_->chained_steps(id, position, count, on_token, capture_step());
  }
  for (int given = 1;; ++given) {
    id = forward_greedy(std::span(&id, 1), position++);
    if (!on_token(id) || given == count) return given;
  }
}

}  // namespace switchyard
