#include "operators/causal_lm.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "core/units.h"
#include "operators/activations.h"
#include "operators/implementation_builders.h"
#include "operators/cpu/half.h"
#include "operators/cpu/sampling.h"
#include "operators/device_tensor.h"
#if SWITCHYARD_HAVE_CUDA
#include "operators/cuda/argmax.h"
#include "operators/cuda/cuda_check.h"
#include "operators/cuda/embedding.h"
#include "operators/cuda/host_poll.h"
#include "operators/cuda/host_table.h"
#include "operators/cuda/timeline.h"
#include "operators/gpu_runtime.h"
#endif

namespace switchyard {

#if SWITCHYARD_HAVE_CUDA
struct CausalLM::DecodeGraph {
  cudaGraphExec_t exec = nullptr;
  std::vector<CpuExpertsHandOff::Job> jobs;  // the host's side of the captured hand-offs
  GpuTimer::Step marks;                      // profile events inside the graph
  bool profiled = false;                     // captured with --profile's events
  bool greedy = false;                       // captured with the head's argmax instead of its logits
  ~DecodeGraph() {
    if (exec != nullptr && cudaGraphExecDestroy(exec) != cudaSuccess) cudaGetLastError();
  }
};

struct CausalLM::GpuLogits {
  GpuRuntime* gpu;
  cuda::DeviceBuffer row;        // [vocab]: the last token's logits (fixed, for the graph)
  cuda::PinnedBuffer host_row;   // [vocab]
  cuda::PinnedBuffer host_id;    // one int32: the argmax, written by the GPU through its device view
  std::int32_t* host_id_device = nullptr;  // that view, looked up once
  cuda::DeviceBuffer all;        // [tokens, vocab] when every token's logits are asked for
  cuda::DeviceBuffer argmax_candidates;   // the greedy choice's scratch (cuda::ArgmaxScratch)
  cuda::ArgmaxScratch argmax_scratch;
};

// What a decode graph reads and writes besides the layers' buffers, so that steps can follow each
// other on the device (decode_greedy).
struct CausalLM::DecodeChain {
  cuda::PinnedBuffer tokens;                // [2] (position << 32 | id): the steps' choices (cuda::NextStep)
  std::uint64_t* tokens_device = nullptr;   // their device view
  std::unique_ptr<cuda::HostTable> embedding;  // with the embedding on the CPU: its table, for the GPU to read
};
#else
struct CausalLM::DecodeGraph {};
struct CausalLM::GpuLogits {};
struct CausalLM::DecodeChain {};
class DeviceRuntimes {};  // no GPUs in this build
#endif

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
  attention_ = build_attention(context, context.child(layer, "self_attn"));
  const bool mixtral = context.tree.config().arch == Architecture::mixtral;
  const Module& mlp = context.child(layer, mixtral ? "block_sparse_moe" : "mlp");
  moe_ = mlp.cls->role == ModuleRole::moe;
  feed_forward_ = build_feed_forward(context, mlp);
  attention_gpu_ = context.gpu(attention_->device());
  feed_forward_gpu_ = context.gpu(feed_forward_->device());
  // A layer's norms run with the half they lead.
  input_norm_ = NormOp(context, context.child(layer, "input_layernorm"), eps, attention_->device());
  post_attention_norm_ = NormOp(context, context.child(layer, "post_attention_layernorm"), eps, feed_forward_->device());
}

void DecoderLayer::forward(ResidualStream& stream, std::int64_t tokens, std::int64_t position) {
  const std::int64_t n = tokens * hidden_size_;
  float* hidden = stream.on(attention_->device());
  CurrentDevice current(attention_gpu_);
  Scratch normed(attention_gpu_, n, "normalised hidden states"), delta(attention_gpu_, n, "attention output");
  // The previous layer's MLP output is added here, in the norm's launch.
  if (const PendingDelta previous = stream.take_delta(); !previous.empty())
    input_norm_.add_and_forward(hidden, previous, tokens, normed);
  else
    input_norm_.forward(hidden, tokens, normed);
  {
    const WorkScope scope(attention_gpu_, tracer_, Region::self_attention, layer_);
    attention_->forward(normed, tokens, position, delta);
  }
  const bool same_device = feed_forward_->device() == attention_->device();
  if (same_device) {
    post_attention_norm_.add_and_forward(hidden, PendingDelta{delta}, tokens, normed);  // residual + norm, one step
  } else {
    add_in_place(attention_gpu_, hidden, delta, n);
    hidden = stream.on(feed_forward_->device());
    current.switch_to(feed_forward_gpu_);
  }
  Scratch ff_normed(same_device ? nullptr : feed_forward_gpu_, same_device ? 0 : n, "normalised hidden states");
  float* ff_in = same_device ? normed.data() : ff_normed.data();
  if (!same_device) post_attention_norm_.forward(hidden, tokens, ff_in);
  // The output is added by the next norm (the next layer's, or the final one).
  float* ff_delta = stream.delta(feed_forward_->device());
  if (moe_) {
    // A MoE block times its own parts (gate, routed and shared experts, hand-offs).
    stream.defer_add(feed_forward_->forward_deferred(ff_in, tokens, ff_delta));
  } else {
    const WorkScope scope(feed_forward_gpu_, tracer_, Region::dense_mlp, layer_);
    stream.defer_add(feed_forward_->forward_deferred(ff_in, tokens, ff_delta));
  }
}

CausalLM::CausalLM(const BuildContext& build, CausalLMOptions options)
    : tracer_(build.tracer),
      options_(options),
      vocab_(build.tree.config().vocab_size),
      hidden_(build.tree.config().hidden_size),
      max_context_(build.max_context) {
  if (options_.prefill_chunk <= 0) throw InputError("the prefill chunk must be at least 1 token");
  BuildContext context = build;
#if SWITCHYARD_HAVE_CUDA
  runtimes_ = std::make_unique<DeviceRuntimes>(options_.prefill_chunk);
  context.runtimes = runtimes_.get();
#endif
  const ModuleTree& tree = context.tree;
  check_kv_cache_fits(tree.config(), context.max_context);
  const Module& root = tree.at(0);
  const Module& model = context.child(root, "model");
  const Module& embed = context.child(model, "embed_tokens");
  embedding_ = context.param(embed, "weight", {DType::f32, DType::bf16, DType::f16});
  embed_device_ = context.device_of(embed);
  for (int layer : context.child(model, "layers").children)
    layers_.push_back(std::make_unique<DecoderLayer>(context, tree.at(layer)));
  const Module& head = context.child(root, "lm_head");
  if (tree.config().tie_word_embeddings)
    throw InputError(tree.config().source + ": tie_word_embeddings is not supported yet");
  final_device_ = context.device_of(head);
  final_norm_ = NormOp(context, context.child(model, "norm"), static_cast<float>(tree.config().rms_norm_eps), final_device_);
  lm_head_ = LinearOp(context, head, final_device_);
#if SWITCHYARD_HAVE_CUDA
  if (GpuRuntime* gpu = context.gpu(embed_device_)) {
    auto table = std::make_shared<DeviceTensor>();
    table->buffer = gpu->context().upload(embedding_.data(), embedding_.bytes(), "the token embedding table");
    table->dtype = embedding_.dtype();
    gpu->context().synchronize();
    device_embedding_ = table;
  }
  if (GpuRuntime* gpu = context.gpu(final_device_)) {
    gpu_logits_ = std::make_unique<GpuLogits>();
    gpu_logits_->gpu = gpu;
    gpu_logits_->row = gpu->context().allocate(static_cast<std::size_t>(vocab_) * sizeof(float), "the logits");
    gpu_logits_->host_row = cuda::PinnedBuffer(static_cast<std::size_t>(vocab_) * sizeof(float), "the logits");
    gpu_logits_->host_id = cuda::PinnedBuffer(sizeof(std::int32_t), "the greedy token");
    gpu_logits_->host_id_device = gpu_logits_->host_id.device_view_as<std::int32_t>();
    gpu_logits_->argmax_candidates =
        gpu->context().allocate(cuda::kArgmaxBlocks * sizeof(float) * 2, "the greedy choice's candidates");
    gpu_logits_->argmax_scratch = {gpu_logits_->argmax_candidates.data(), gpu->zeroed_counters(1)};
  }
  // One graph per decode step when the decoder stack and the head share one GPU (the embedding
  // may be on the CPU: its row is the graph's input).
  std::set<Device> devices{final_device_};
  for (const auto& layer : layers_) {
    devices.insert(layer->attention_device());
    devices.insert(layer->feed_forward_device());
  }
  if (options_.use_cuda_graph && devices.size() == 1 && final_device_.is_cuda() &&
      (embed_device_.is_cpu() || embed_device_ == final_device_))
    graph_gpu_ = &runtimes_->get(final_device_);
  if (graph_gpu_ != nullptr) {
    chain_ = std::make_unique<DecodeChain>();
    chain_->tokens = cuda::PinnedBuffer(2 * sizeof(std::uint64_t), "the decode steps' tokens");
    chain_->tokens_device = chain_->tokens.device_view_as<std::uint64_t>();
    // The graph gathers the step's row itself (no host work between steps), from host memory as the
    // placement says, read over the bus: the checkpoint's pages, or a page-locked copy.
    if (embed_device_.is_cpu())
      chain_->embedding = std::make_unique<cuda::HostTable>(embedding_.data(), embedding_.bytes(),
                                                            "the token embedding table (for decode graphs)",
                                                            embedding_.in_read_only_pages());
  }
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
  return "embedding " + embed_device_.str() + "; attention " + list(attention) + "; MLP/MoE blocks " +
         list(feed_forward) + "; head " + final_device_.str();
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
    std::int32_t id = 0;
    std::memcpy(&id, gpu_logits_->host_id.data(), sizeof(id));
    return id;
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
    cpu::widen_to_f32(row.dtype(), row.data(), static_cast<std::size_t>(hidden_), hidden + t * hidden_);
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
    cuda::embedding(gpu->ids(), tokens, device_embedding_->buffer.data(), device_embedding_->dtype, vocab_, hidden_,
                    hidden, gpu->stream());
  } else if (capturing_decode_) {  // the embedding on the CPU: its mapped table (DecodeChain)
    const CurrentDevice current(graph_gpu_);
    float* hidden = stream_->start(graph_gpu_->where(), tokens);
    cuda::embedding(graph_gpu_->ids(), tokens, chain_->embedding->device_view(), embedding_.dtype(), vocab_, hidden_,
                    hidden, graph_gpu_->stream());
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
  GpuRuntime* gpu = nullptr;
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
    lm_head_.forward(normed, 1, out.row.as<float>());
    // A decode graph's argmax also hands the next step its token and position (decode_greedy).
    const cuda::NextStep next = capturing_decode_ ? cuda::NextStep{gpu->step_record(), chain_->tokens_device}
                                                  : cuda::NextStep{};
    if (greedy_) cuda::argmax(out.row.as<float>(), vocab_, out.host_id_device, gpu->stream(), next, &out.argmax_scratch);
    else gpu->context().copy_to_host(out.host_row.data(), out.row.data(), out.row.bytes());
  } else {
    if (out.all.bytes() < static_cast<std::size_t>(rows * vocab_) * sizeof(float))
      out.all = gpu->context().allocate(static_cast<std::size_t>(rows * vocab_) * sizeof(float), "every token's logits");
    lm_head_.forward(normed, rows, out.all.as<float>());
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
  enqueue(ids, position, all_logits);
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
    std::vector<float> logits(static_cast<std::size_t>(rows * vocab_));
    if (rows == 1) std::memcpy(logits.data(), gpu_logits_->host_row.data(), logits.size() * sizeof(float));
    else SWITCHYARD_CUDA_CHECK(cudaMemcpy(logits.data(), gpu_logits_->all.data(), logits.size() * sizeof(float), cudaMemcpyDeviceToHost));
    return logits;
  }
#else
  (void)start_ns;
  (void)rows;
#endif
  return logits_;
}

#if SWITCHYARD_HAVE_CUDA
void CausalLM::ensure_decode_graph(std::int32_t id, std::int64_t position) {
  const bool profiling = tracer_ != nullptr && tracer_->profiling();
  if (graph_ && graph_->profiled == profiling && graph_->greedy == greedy_) return;
  graph_.reset();
  // Capture once (again when profiling or greedy is switched): the same kernels, hand-offs and
  // profile events as an eager step, reading the step's position and token from device memory (the
  // record uploaded before each launch, or left by the step before), the embedding row from the
  // table and the CPU experts' inputs from pinned memory.
  GpuRuntime& gpu = *graph_gpu_;
  const std::span<const std::int32_t> ids(&id, 1);
  runtimes_->synchronize();
  auto graph = std::make_unique<DecodeGraph>();
  cudaGraph_t captured = nullptr;
  gpu.context().pool().begin_capture();
  gpu.timer().set_capturing(true);
  runtimes_->begin_capture();
  capturing_decode_ = true;
  auto end_capture = [&] {  // the stream's capture, then everyone's, in the order they began
    const cudaError_t ended = cudaStreamEndCapture(gpu.stream(), &captured);
    capturing_decode_ = false;
    gpu.context().pool().end_capture();
    gpu.timer().set_capturing(false);
    graph->jobs = runtimes_->end_capture();
    return ended;
  };
  try {
    SWITCHYARD_CUDA_CHECK(cudaStreamBeginCapture(gpu.stream(), cudaStreamCaptureModeRelaxed));
    enqueue(ids, position, false);
  } catch (...) {
    end_capture();
    if (captured != nullptr) cudaGraphDestroy(captured);
    cudaGetLastError();
    throw;
  }
  SWITCHYARD_CUDA_CHECK(end_capture());
  const cudaError_t instantiated = cudaGraphInstantiate(&graph->exec, captured, 0);
  cudaGraphDestroy(captured);
  SWITCHYARD_CUDA_CHECK(instantiated);
  if (profiling) graph->marks = gpu.timer().take_step();
  graph->profiled = profiling;
  graph->greedy = greedy_;
  graph_ = std::move(graph);
}

void CausalLM::launch_decode_graph() {
  // The jobs go to the worker first: a launch that waits for queue space must not wait for them.
  runtimes_->set_launching(true);
  for (const CpuExpertsHandOff::Job& job : graph_->jobs) runtimes_->enqueue(job);
  const cudaError_t launched = cudaGraphLaunch(graph_->exec, graph_gpu_->stream());
  runtimes_->set_launching(false);
  SWITCHYARD_CUDA_CHECK(launched);
}

void CausalLM::prepare_decode_graph(std::int32_t id, std::int64_t position) {
  prepare(std::span(&id, 1), position, /*embed_on_host=*/false);
  ensure_decode_graph(id, position);
  graph_gpu_->upload_step();
}

std::vector<float> CausalLM::decode_with_graph(std::int32_t id, std::int64_t position) {
  GpuRuntime& gpu = *graph_gpu_;
  prepare_decode_graph(id, position);
  const std::int64_t start_ns = Tracer::now_ns();
  launch_decode_graph();
  runtimes_->synchronize();
  if (graph_->profiled) gpu.timer().report(graph_->marks, *tracer_, start_ns);
  if (greedy_) return {};  // forward_greedy reads the id
  std::vector<float> logits(static_cast<std::size_t>(vocab_));
  std::memcpy(logits.data(), gpu_logits_->host_row.data(), logits.size() * sizeof(float));
  return logits;
}

bool CausalLM::chains_decode_steps() const {
  if (graph_gpu_ == nullptr || gpu_logits_ == nullptr) return false;
  return tracer_ == nullptr || !tracer_->marks_steps();
}

std::int32_t CausalLM::wait_for_token(std::int64_t position, std::size_t later_jobs) {
  std::atomic_ref<std::uint64_t> slot(chain_->tokens.as<std::uint64_t>()[position % 2]);
  // Asleep: the next step is queued already, so a late look costs no GPU time (cuda::PollPause).
  // First until this step's CPU jobs are done (the next step's are queued behind them), then
  // between looks at the slot.
  runtimes_->wait_for_jobs(later_jobs);
  std::int32_t token = 0;
  cuda::poll_until(
      [&] {
        const std::uint64_t value = slot.load(std::memory_order_acquire);
        token = static_cast<std::int32_t>(value & 0xffffffffu);
        return static_cast<std::int64_t>(value >> 32) == position;
      },
      graph_gpu_->stream(), cuda::PollPause::sleep,
      [&] {
        return "the GPU finished the decode step before position " + std::to_string(position) +
               " without handing over its token";
      });
  return token;
}

int CausalLM::decode_chained(std::int32_t id, std::int64_t position, int count,
                             const std::function<bool(std::int32_t)>& on_token) {
  check_token_ids(std::span(&id, 1));
  check_context(position, count, max_context_);
  runtimes_->synchronize();  // nothing in flight: the token slots can be cleared
  for (int i = 0; i < 2; ++i) chain_->tokens.as<std::uint64_t>()[i] = ~std::uint64_t{0};
  const GreedyScope greedy(greedy_);
  int given = 0;
  try {
    prepare_decode_graph(id, position);
    launch_decode_graph();
    for (int k = 0; k < count; ++k) {
      const bool more = k + 1 < count;
      if (more) launch_decode_graph();  // its token and position come from step k, on the device
      const std::int32_t next = wait_for_token(position + k + 1, more ? graph_->jobs.size() : 0);
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
