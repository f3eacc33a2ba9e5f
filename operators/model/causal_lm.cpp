#include "operators/model/causal_lm.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "core/quant_formats.h"
#include "core/units.h"
#include "operators/ops/activations.h"
#include "operators/model/implementation_builders.h"
#include "core/half_float.h"
#include "operators/cpu/kernels/sampling.h"
#include "operators/ops/device_tensor.h"
#include "operators/ops/device_runtime.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/kernels/embedding.h"
#include "operators/cuda/measure/timeline.h"
#include "operators/cuda/decode_chain.h"
#include "operators/cuda/decode_graph.h"
#include "operators/cuda/gpu_logits.h"
#include "operators/cuda/gpu_runtime.h"
#endif

namespace switchyard {

#if !SWITCHYARD_HAVE_CUDA
class DecodeChain {};  // no GPUs in this build
class DecodeGraph {};
class GpuLogits {};
class DeviceRuntimes : public Accelerators {};  // never made: no GPU backend
#endif

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
#if SWITCHYARD_HAVE_CUDA
  runtimes_ = std::make_unique<DeviceRuntimes>(options_.prefill_chunk, options_.device_map);
  context.runtimes = runtimes_.get();
#endif
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
#if SWITCHYARD_HAVE_CUDA
  if (GpuRuntime* gpu = as_gpu(context.gpu(embed_device_))) {
    auto table = std::make_shared<DeviceTensor>();
    table->memory = std::make_unique<CudaMemory>(
        gpu->context().upload(embedding_.data(), embedding_.bytes(), "the token embedding table"));
    table->dtype = embedding_.dtype();
    gpu->context().synchronize();
    device_embedding_ = table;
  }
  if (GpuRuntime* gpu = as_gpu(context.gpu(final_device_))) gpu_logits_ = std::make_unique<GpuLogits>(*gpu, vocab_);
  // One graph per decode step when the decoder stack and the head run on GPUs (the embedding may
  // be on the CPU: its row is the graph's input).
  std::set<Device> devices{final_device_};
  for (const auto& layer : layers_) {
    devices.insert(layer->attention_device());
    devices.insert(layer->feed_forward_device());
  }
  const bool all_gpus = std::all_of(devices.begin(), devices.end(), [](Device d) { return d.is_cuda(); });
  if (options_.use_cuda_graph && all_gpus && !layers_.empty() && (embed_device_.is_cpu() || devices.count(embed_device_) > 0))
    graph_gpu_ = &runtimes_->get(final_device_);
  if (graph_gpu_ != nullptr) chain_ = std::make_unique<DecodeChain>(embed_device_.is_cpu() ? &embedding_ : nullptr);
#endif
  stream_ = std::make_unique<ResidualStream>(runtimes_.get(), options_.prefill_chunk, hidden_);
}

CausalLM::~CausalLM() {
#if SWITCHYARD_HAVE_CUDA
  // The CPU-experts worker may hold jobs that point into the layers, which go first.
  if (runtimes_) runtimes_->shutdown();
#endif
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
#if SWITCHYARD_HAVE_CUDA
  if (runtimes_) runtimes_->skip_expert_work(skip);
#else
  (void)skip;
#endif
}

void CausalLM::discard_decode_graph() {
#if SWITCHYARD_HAVE_CUDA
  if (!runtimes_) return;
  runtimes_->synchronize();  // no step still running
  graph_.reset();
  // Steps with launches left out may have left hand-off flags up: back to a finished step's state.
  for (const auto& [index, gpu] : runtimes_->all()) gpu->reset_hand_off();
#endif
}

std::optional<Device> CausalLM::graph_device() const {
#if SWITCHYARD_HAVE_CUDA
  if (graph_gpu_ != nullptr) return graph_gpu_->where();
#endif
  return std::nullopt;
}

std::size_t CausalLM::graph_gpus() const {
#if SWITCHYARD_HAVE_CUDA
  if (graph_) return graph_->gpus();
#endif
  return 0;
}

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
#if SWITCHYARD_HAVE_CUDA
  if (gpu_logits_ != nullptr) {  // the head is on a GPU
    {
      const GreedyScope greedy(greedy_);
      forward(ids, position);
    }
    return gpu_logits_->greedy_id();
  }
#endif
  const std::vector<float> logits = forward(ids, position);
  return cpu::argmax(logits.data(), vocab_);
}

void CausalLM::prepare(std::span<const std::int32_t> ids, std::int64_t position, bool embed_on_host) {
  const auto tokens = static_cast<std::int64_t>(ids.size());
#if SWITCHYARD_HAVE_CUDA
  for (const auto& [index, gpu] : runtimes_->all()) gpu->write_step(position, ids);
#else
  (void)position;
#endif
  if (!embed_device_.is_cpu() || !embed_on_host) return;
  float* hidden = stream_->start(Device::cpu(), tokens);
  for (std::int64_t t = 0; t < tokens; ++t) {
    const Tensor row = embedding_.rows(ids[static_cast<std::size_t>(t)], 1);
    if (is_block_quantized(row.dtype()))
      quant::dequantize_row(row.dtype(), row.data(), hidden + t * hidden_, hidden_);
    else
      widen_to_f32(row.dtype(), row.data(), static_cast<std::size_t>(hidden_), hidden + t * hidden_);
  }
}

void CausalLM::enqueue(std::span<const std::int32_t> ids, std::int64_t position, bool all_logits) {
  const auto tokens = static_cast<std::int64_t>(ids.size());
#if SWITCHYARD_HAVE_CUDA
  // With --profile, each GPU's whole step is a region too: what its regions leave out is launch
  // gaps and glue.
  struct StepMarks {
    std::vector<std::pair<GpuRuntime*, int>> marks;
    ~StepMarks() {
      for (auto [gpu, mark] : marks) {
        try {
          gpu->timer().end(gpu->stream(), mark);
        } catch (...) {
          // a lost profile mark; the stream's error surfaces at its sync
        }
      }
    }
  } step_marks;
  for (const auto& [index, gpu] : runtimes_->all()) {
    if (!capturing_decode_) gpu->upload_step();  // a decode graph's record is uploaded before it, or left by the step before
    if (tracer_ == nullptr || !tracer_->profiling()) continue;
    gpu->timer().start_step(gpu->stream());
    step_marks.marks.emplace_back(gpu.get(), gpu->timer().begin(gpu->stream(), tokens == 1 ? Region::decode_step : Region::prefill, -1));
  }
  if (GpuRuntime* gpu = runtimes_->find(embed_device_)) {
    const CurrentDevice current(gpu);
    float* hidden = stream_->start(embed_device_, tokens);
    cuda::embedding(gpu->ids(), tokens, device_embedding_->data(), device_embedding_->dtype, vocab_, hidden_,
                    hidden, gpu->stream());
  } else if (capturing_decode_) {  // the embedding on the CPU: its mapped table (DecodeChain), on the first layer's GPU
    GpuRuntime* first = &runtimes_->get(layers_.front()->attention_device());
    const CurrentDevice current(first);
    float* hidden = stream_->start(first->where(), tokens);
    cuda::embedding(first->ids(), tokens, chain_->embedding_device_view(), embedding_.dtype(), vocab_, hidden_,
                    hidden, first->stream());
  }
  cuda::mark_launches(cuda::kLayersMark);  // for bench decode --timeline: where the decoder layers begin and end
#endif
  for (auto& layer : layers_) layer->forward(*stream_, tokens, position);
#if SWITCHYARD_HAVE_CUDA
  cuda::mark_launches(cuda::kHeadMark);
#endif

  const std::int64_t rows = all_logits ? tokens : 1;
  float* hidden = stream_->on(final_device_) + (tokens - rows) * hidden_;
  const PendingDelta last_delta = stream_->take_delta();
#if SWITCHYARD_HAVE_CUDA
  GpuRuntime* gpu = runtimes_->find(final_device_);
#else
  DeviceRuntime* gpu = nullptr;
#endif
  const CurrentDevice current(gpu);
  Scratch normed(gpu, rows * hidden_, "the final norm's output");
  // The last layer's output is added to the rows normed here only: nothing reads the others after.
  if (!last_delta.empty()) final_norm_.add_and_forward(hidden, last_delta.from_row(tokens - rows, hidden_), rows, normed);
  else final_norm_.forward(hidden, rows, normed);
  const WorkScope scope(gpu, tracer_, Region::lm_head);
  if (gpu == nullptr) {
    logits_.resize(static_cast<std::size_t>(rows * vocab_));
    lm_head_.forward(normed, rows, logits_.data());
    return;
  }
#if SWITCHYARD_HAVE_CUDA
  GpuLogits& out = *gpu_logits_;
  if (rows == 1) {
    lm_head_.forward(normed, 1, out.row());
    // A decode graph's argmax also hands the next step its token and position (decode_greedy).
    if (greedy_) out.queue_argmax(capturing_decode_ ? cuda::NextStep{gpu->step_record(), chain_->slots_device()}
                                                    : cuda::NextStep{});
    else out.queue_row_to_host();
  } else {
    lm_head_.forward(normed, rows, out.all(rows));
  }
#endif
}

std::vector<float> CausalLM::run_chunk(std::span<const std::int32_t> ids, std::int64_t position, bool all_logits) {
  const auto tokens = static_cast<std::int64_t>(ids.size());
#if SWITCHYARD_HAVE_CUDA
  if (graph_gpu_ != nullptr && tokens == 1 && !all_logits) return decode_with_graph(ids[0], position);
#endif
  prepare(ids, position);
  const std::int64_t start_ns = Tracer::now_ns();
#if SWITCHYARD_HAVE_CUDA
  {
    // A long eager step fills the driver's queue: its launches then wait for the CPU experts.
    const DeviceRuntimes::Launching queuing(*runtimes_);
    enqueue(ids, position, all_logits);
  }
#else
  enqueue(ids, position, all_logits);
#endif
  const std::int64_t rows = all_logits ? tokens : 1;
#if SWITCHYARD_HAVE_CUDA
  runtimes_->synchronize();
  if (tracer_ != nullptr && tracer_->profiling())
    for (const auto& [index, gpu] : runtimes_->all()) {
      GpuTimer::Step step = gpu->timer().take_step();
      gpu->timer().report(step, *tracer_, start_ns);
      gpu->timer().recycle(step);
    }
  if (runtimes_->find(final_device_) != nullptr) {
    if (greedy_ && rows == 1) return {};  // forward_greedy reads the id
    return rows == 1 ? gpu_logits_->host_row() : gpu_logits_->read_all(rows);
  }
#else
  (void)start_ns;
  (void)rows;
#endif
  return logits_;
}

#if SWITCHYARD_HAVE_CUDA
void CausalLM::ensure_decode_graph(std::int32_t id, std::int64_t position) {
  const DecodeGraph::Kind kind{tracer_ != nullptr && tracer_->profiling(), greedy_};
  if (graph_ && graph_->kind() == kind) return;
  graph_.reset();
  // Captured once (again when profiling or greedy is switched): the same kernels, hand-offs and
  // profile events as an eager step, reading the step's position and token from device memory (the
  // record uploaded before each launch, or left by the step before), the embedding row from the
  // table and the CPU experts' inputs from pinned memory.
  const std::span<const std::int32_t> ids(&id, 1);
  struct Capturing {
    bool& flag;
    explicit Capturing(bool& f) : flag(f) { flag = true; }
    ~Capturing() { flag = false; }
  };
  graph_ = std::make_unique<DecodeGraph>(*runtimes_, *graph_gpu_, kind, [&] {
    const Capturing capturing(capturing_decode_);
    enqueue(ids, position, false);
  });
}

void CausalLM::prepare_decode_graph(std::int32_t id, std::int64_t position) {
  prepare(std::span(&id, 1), position, /*embed_on_host=*/false);
  ensure_decode_graph(id, position);
  graph_gpu_->upload_step();
}

std::vector<float> CausalLM::decode_with_graph(std::int32_t id, std::int64_t position) {
  prepare_decode_graph(id, position);
  const std::int64_t start_ns = Tracer::now_ns();
  graph_->launch();
  runtimes_->synchronize();
  if (graph_->kind().profiled)
    for (const auto& [each, marks] : graph_->marks()) each->timer().report(marks, *tracer_, start_ns);
  if (greedy_) return {};  // forward_greedy reads the id
  return gpu_logits_->host_row();
}

bool CausalLM::chains_decode_steps() const {
  if (graph_gpu_ == nullptr || gpu_logits_ == nullptr) return false;
  return tracer_ == nullptr || !tracer_->marks_steps();
}

int CausalLM::decode_chained(std::int32_t id, std::int64_t position, int count,
                             const std::function<bool(std::int32_t)>& on_token) {
  check_token_ids(std::span(&id, 1));
  check_context(position, count, max_context_);
  runtimes_->synchronize();  // nothing in flight: the token slots can be cleared
  chain_->clear_slots();
  const GreedyScope greedy(greedy_);
  int given = 0;
  try {
    prepare_decode_graph(id, position);
    graph_->launch();
    for (int k = 0; k < count; ++k) {
      const bool more = k + 1 < count;
      if (more) graph_->launch();  // its token and position come from step k, on the device
      const std::int32_t next =
          chain_->wait_for_token(*runtimes_, *graph_gpu_, position + k + 1, more ? graph_->jobs() : 0);
      runtimes_->throw_if_failed();
      ++given;
      if (!on_token(next)) break;
    }
    runtimes_->synchronize();
  } catch (...) {
    try {
      runtimes_->synchronize();
    } catch (...) {
      // the first error is the one to report
    }
    throw;
  }
  return given;
}
#else
std::vector<float> CausalLM::decode_with_graph(std::int32_t, std::int64_t) { return {}; }
bool CausalLM::chains_decode_steps() const { return false; }
#endif

int CausalLM::decode_greedy(std::int32_t id, std::int64_t position, int count,
                            const std::function<bool(std::int32_t)>& on_token) {
  if (count <= 0) return 0;
#if SWITCHYARD_HAVE_CUDA
  if (chains_decode_steps()) return decode_chained(id, position, count, on_token);
#endif
  for (int given = 1;; ++given) {
    id = forward_greedy(std::span(&id, 1), position++);
    if (!on_token(id) || given == count) return given;
  }
}

}  // namespace switchyard
