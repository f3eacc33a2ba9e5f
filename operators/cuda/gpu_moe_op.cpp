#include "operators/cuda/gpu_moe_op.h"

#include <cstring>

#include "core/error.h"
#include "operators/ops/activations.h"
#include "operators/ops/backend.h"
#include "operators/cuda/kernels/moe_gate.h"
#include "operators/cuda/kernels/routed_experts.h"

namespace switchyard {

// One layer's routed experts stacked on the GPU: gate and up [experts, inter, hidden], down
// [experts, hidden, inter], as cuda::routed_experts reads them; floats, or the file's blocks where
// the plan keeps them (experts.gpu.quant, placement/weight_storage.h).
struct GpuExpertStack {
  cuda::DeviceBuffer gate, up, down;
  cuda::ExpertStack stack{};
};

namespace {

std::unique_ptr<GpuExpertStack> upload_experts(const BuildContext& context, GpuRuntime& gpu, const Module& experts) {
  const ExpertNames names = expert_names(context.tree.config());
  auto result = std::make_unique<GpuExpertStack>();
  const auto count = static_cast<std::int64_t>(experts.children.size());
  const std::string what = "the routed experts of " + std::string(experts.name);
  // One projection of one expert at a time, each uploaded before the next is loaded: a layer's
  // experts converted at load (KExpertsTorch on a GGUF: DeepSeek-V3's 22 GiB of bf16 a layer) are
  // never on the host at once.
  cuda::DeviceBuffer* buffers[3] = {&result->gate, &result->up, &result->down};
  const char* projections[3] = {names.gate, names.up, names.down};
  DType dtypes[3] = {};
  std::int64_t gate_rows = 0, gate_in = 0;
  for (int i = 0; i < 3; ++i) {
    std::size_t each = 0;
    for (std::int64_t e = 0; e < count; ++e) {
      const Module& projection = context.child(context.tree.at(experts.children[static_cast<std::size_t>(e)]), projections[i]);
      const DType resident = context.resident_dtype(projection, "weight", gpu.where());
      const Tensor t = is_block_quantized(resident) ? context.param(projection, "weight", {resident})
                                                    : context.param(projection, "weight", {DType::bf16, DType::f32});
      if (e == 0) {
        dtypes[i] = t.dtype();
        each = t.bytes();
        if (i == 0) gate_rows = t.dim(0), gate_in = t.dim(1);
        *buffers[i] = gpu.context().allocate(each * static_cast<std::size_t>(count), what);
      }
      if (t.dtype() != dtypes[i] || t.bytes() != each)
        throw InputError(what + ": experts of mixed dtypes cannot be stacked on the GPU");
      gpu.context().copy_to_device(static_cast<char*>(buffers[i]->data()) + each * static_cast<std::size_t>(e),
                                   t.data(), each);
      if (!t.in_read_only_pages()) gpu.context().synchronize();  // a converted copy goes with `t`; the mapping stays
    }
  }
  gpu.context().synchronize();
  const DType gate = dtypes[0], up = dtypes[1], down = dtypes[2];
  if (up != gate || (!is_block_quantized(gate) && down != gate))
    throw InputError(what + ": gate, up and down in " + dtype_name(gate) + ", " + dtype_name(up) + " and " +
                     dtype_name(down) + " cannot be stacked on the GPU (one dtype, or blocks with down of its own)");
  result->stack = cuda::ExpertStack{result->gate.data(), result->up.data(), result->down.data(), gate, count,
                                    gate_in, gate_rows, down};
  return result;
}

}  // namespace

GpuMoeOp::GpuMoeOp(const BuildContext& context, const Module& moe)
    : gpu_(as_gpu(context.gpu(context.device_of(moe)))),
      tracer_(context.tracer),
      layer_(moe.layer),
      layers_(context.tree.num_layers()),
      hidden_(context.tree.config().hidden_size) {
  const ModelConfig& c = context.tree.config();
  const Module& gate = context.child(moe, "gate");
  require_same_device(context, moe, gate);
  // The router in f32: transformers computes DeepSeek's router logits in f32, and the top-k choice
  // is the one step where rounding could change which experts run.
  router_ = LinearOp(context, gate, gpu_->where(), /*widen_to_f32=*/true);
  for (const Parameter& p : gate.params)
    if (p.name == "e_score_correction_bias") {
      const std::vector<float> bias = context.param_f32(gate, "e_score_correction_bias");
      correction_bias_ = gpu_->context().upload(bias.data(), bias.size() * sizeof(float), "a router's correction bias");
      gpu_->context().synchronize();
    }
  gate_ = gate_config(c, correction_bias_.empty() ? nullptr : correction_bias_.as<float>());
  // Decode's router and gate in one launch (a bias-free f32 router: the fused kernel has no bias).
  if (router_.device_dtype() == DType::f32 && !router_.has_bias()) router_counter_ = gpu_->zeroed_counters(1);

  // The routed experts run as the plan says per phase: experts.cpu through the hand-off, or
  // experts.gpu resident on this GPU.
  const Module& experts = context.child(moe, "experts");
  const PhaseImplementations routed = context.implementation(experts);
  generate_experts_ = routed.generate;
  prefill_experts_ = routed.prefill;
  for (const auto& [implementation, device] : {std::pair{routed.generate, context.generate_device(experts)},
                                               std::pair{routed.prefill, context.prefill_device(experts)}}) {
    if ((implementation == Implementation::experts_gpu || implementation == Implementation::experts_gpu_quant) &&
        device == gpu_->where())
      continue;
    if (implementation == Implementation::experts_cpu) continue;
    throw InputError("the profile runs " + std::string(moe.name) + " on " + gpu_->where().str() +
                     " but its routed experts as " + implementation_name(implementation) + " on " + device.str() +
                     "; experts run on the CPU or on their block's GPU");
  }
  context.record(experts, routed);
  if (generate_experts_ == Implementation::experts_cpu || prefill_experts_ == Implementation::experts_cpu)
    cpu_experts_ = build_host_experts(context, experts);
  auto on_gpu = [](Implementation i) {
    return i == Implementation::experts_gpu || i == Implementation::experts_gpu_quant;
  };
  if (on_gpu(generate_experts_) || on_gpu(prefill_experts_))
    gpu_experts_ = upload_experts(context, *gpu_, experts);
  for (int child : moe.children)
    if (context.tree.at(child).local_name() == "shared_experts") {
      shared_ = std::make_unique<MlpOp>(context, context.tree.at(child));
      if (shared_->device() != gpu_->where()) require_same_device(context, moe, context.tree.at(child));
    }
}

GpuMoeOp::~GpuMoeOp() = default;

void GpuMoeOp::forward(const float* x, std::int64_t tokens, float* out) {
  const PendingDelta left = forward_deferred(x, tokens, out);
  if (left.host == nullptr) return;  // `out` holds it all
  const WorkScope scope(gpu_, tracer_, Region::cpuinfer_sync, layer_);
  gpu_->hand_off(layers_, hidden_, gate_.top_k).collect(layer_, out, tokens, left.device);
}

PendingDelta GpuMoeOp::forward_deferred(const float* x, std::int64_t tokens, float* out) {
  const int top_k = gate_.top_k;
  cudaStream_t stream = gpu_->stream();
  Scratch logits(gpu_, tokens * gate_.n_experts, "router logits");
  cuda::DeviceBuffer ids = gpu_->context().allocate(static_cast<std::size_t>(tokens * top_k) * sizeof(std::int32_t),
                                                    "routed expert ids");
  Scratch weights(gpu_, tokens * top_k, "routing weights");
  const Implementation experts = tokens > 1 ? prefill_experts_ : generate_experts_;
  CpuExpertsHandOff* hand_off = experts == Implementation::experts_cpu ? &gpu_->hand_off(layers_, hidden_, top_k) : nullptr;
  // One token for the CPU experts: the gate's own launch hands it over, the shared experts write
  // `out`, and the routed sum stays on the host for the caller to add (forward_deferred's result).
  // Otherwise `out` gets the routed sum and the shared experts' output is added to it.
  const bool one_token_to_cpu = hand_off != nullptr && tokens == 1;
  cuda::GateHandOff gate_hand_off;
  if (one_token_to_cpu) gate_hand_off = hand_off->gate_hand_off(layer_, x);
  std::unique_ptr<Scratch> shared_scratch;
  float* shared_out = nullptr;
  if (shared_) {
    if (!one_token_to_cpu) shared_scratch = std::make_unique<Scratch>(gpu_, tokens * hidden_, "shared experts' output");
    shared_out = one_token_to_cpu ? out : shared_scratch->data();
  }
  // One token: the shared experts' gate, up and SiLU-mul run in the router's launch (side blocks),
  // which leaves their down projection for later.
  std::unique_ptr<Scratch> shared_h;
  bool side_ran = false;
  {
    const WorkScope scope(gpu_, tracer_, Region::moe_gate, layer_);
    const auto* router = static_cast<const float*>(router_.device_weight());
    if (tokens == 1 && router_counter_ != nullptr && cuda::router_gate_supports(hidden_, router, x)) {
      cuda::SideSwiglu side;
      if (shared_) {
        shared_h = std::make_unique<Scratch>(gpu_, shared_->gate_proj().out_features(), "shared experts' activations");
        side_ran = side_swiglu(x, *shared_h, side);
      }
      cuda::router_gate(gate_, router, hidden_, x, logits, ids.as<std::int32_t>(), weights, router_counter_, stream,
                        one_token_to_cpu ? &gate_hand_off : nullptr,
                        side_ran ? &side : nullptr);
    } else {
      router_.forward(x, tokens, logits);
      cuda::moe_gate(gate_, logits, tokens, ids.as<std::int32_t>(), weights, stream,
                     one_token_to_cpu ? &gate_hand_off : nullptr);
    }
  }
  // The shared experts' work the router's launch did not do.
  auto rest_of_shared = [&] {
    if (!shared_) return;
    const WorkScope scope(gpu_, tracer_, Region::shared_experts, layer_);
    if (side_ran) shared_->down_proj().forward(*shared_h, tokens, shared_out);
    else shared_->forward(x, tokens, shared_out);
  };
  if (hand_off != nullptr) {
    {
      const WorkScope scope(gpu_, tracer_, Region::cpuinfer_submit, layer_);
      gpu_->runtimes().enqueue(
          one_token_to_cpu ? hand_off->job(layer_, tokens, *cpu_experts_, tracer_)
                           : hand_off->submit(layer_, x, ids.as<std::int32_t>(), weights, tokens, *cpu_experts_, tracer_));
    }
    rest_of_shared();  // on the GPU while the CPU computes the routed experts
    if (one_token_to_cpu) return hand_off->pending(layer_, shared_out);
    const WorkScope scope(gpu_, tracer_, Region::cpuinfer_sync, layer_);
    hand_off->collect(layer_, out, tokens, shared_out);
    return PendingDelta{out};
  }
  {
    // The per-expert prefill path (f32 or unaligned experts) reads its group sizes on the host:
    // CPU experts queued by earlier layers must be served first, or the stream would wait for
    // them forever. The decode and grouped paths never wait for the host.
    if (!cuda::routed_experts_uses_decode_path(tokens, top_k) &&
        !cuda::routed_experts_prefill_is_grouped(gpu_experts_->stack))
      gpu_->runtimes().serve();
    const WorkScope scope(gpu_, tracer_, Region::routed_experts, layer_);
    const std::size_t bytes = cuda::routed_experts_workspace_bytes(gpu_experts_->stack, tokens, top_k);
    cuda::DeviceBuffer workspace = gpu_->context().allocate(bytes, "the routed experts' workspace");
    cuda::routed_experts(gpu_->context(), gpu_experts_->stack, x, tokens, ids.as<std::int32_t>(), weights, top_k, out,
                         workspace.data(), bytes);
  }
  rest_of_shared();
  if (shared_) add_in_place(gpu_, out, shared_out, tokens * hidden_);
  return PendingDelta{out};
}

bool GpuMoeOp::side_swiglu(const float* x, float* h, cuda::SideSwiglu& side) const {
  const LinearOp &gate = shared_->gate_proj(), &up = shared_->up_proj();
  side = cuda::SideSwiglu{gate.device_weight(), up.device_weight(), gate.device_dtype(), gate.in_features(),
                          gate.out_features(), x, h};
  return shared_->gate_up_fusable() && cuda::router_gate_side_supports(gate_, side);
}

}  // namespace switchyard
