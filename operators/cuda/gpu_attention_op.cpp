#include "operators/cuda/gpu_attention_op.h"

#include <cublas_v2.h>

#include <cstring>
#include <optional>

#include "operators/ops/activations.h"
#include "core/half_float.h"
#include "operators/cuda/kernels/attention.h"
#include "operators/cuda/kernels/cuda_check.h"
#include "operators/cuda/kernels/elementwise.h"
#include "operators/cuda/kernels/gemv.h"
#include "operators/cuda/kernels/kv_cache.h"
#include "operators/cuda/kernels/mla_decode.h"
#include "operators/cuda/kernels/prefill_attention.h"
#include "operators/cuda/kernels/rope.h"

namespace switchyard {
namespace {

// Buffer `buffer` of the layer's cache, zeroed: rows past the written positions are never read,
// but zeros keep a debugger's view (and compute-sanitizer's initcheck) clean. Its bytes are the
// layout's, which check's estimate counts.
cuda::DeviceBuffer make_cache(GpuRuntime& gpu, const KvCacheLayout& layout, int buffer, const std::string& where) {
  const KvCacheBuffer& b = layout.buffers.at(static_cast<std::size_t>(buffer));
  cuda::DeviceBuffer cache = gpu.context().allocate(static_cast<std::size_t>(layout.buffer_bytes(buffer)),
                                                    std::string("the ") + b.what + " cache" + where);
  SWITCHYARD_CUDA_CHECK(cudaMemsetAsync(cache.data(), 0, cache.bytes(), gpu.stream()));
  return cache;
}

// The first `rows` rows of a cache as f32, for a prompt's attention (cuBLAS multiplies f32): the
// cache itself when it is f32, else a widened copy in `copy`.
const float* rows_as_f32(GpuRuntime& gpu, const cuda::DeviceBuffer& cache, DType dtype, std::int64_t rows,
                         std::int64_t width, std::optional<Scratch>& copy, const char* what) {
  if (dtype == DType::f32) return cache.as<float>();
  copy.emplace(&gpu, rows * width, what);
  cuda::widen_cache_rows(cache.data(), dtype, rows, width, copy->data(), gpu.stream());
  return copy->data();
}

// Batched over heads: C_h = op(A_h) B_h, column-major as cuBLAS sees the row-major operands.
// A is a kv_b_proj weight (bf16 or f32); B is f32 activations, rounded to bf16 first when A is
// bf16 (cuBLAS multiplies like types; products accumulate in f32).
struct HeadBatch {
  cublasOperation_t op_a;
  int m, n, k;
  const void* a;
  long long lda, stride_a;
  const float* b;
  long long ldb, stride_b, b_count;  // b_count: floats spanned by B, for its bf16 copy
  float* c;
  long long ldc, stride_c;
  int batch;
};

void gemm_heads(GpuRuntime& gpu, DType a_dtype, const HeadBatch& g) {
  const float alpha = 1.0f, beta = 0.0f;
  cuda::DeviceContext& context = gpu.context();
  if (a_dtype == DType::f32) {
    SWITCHYARD_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        context.cublas(), g.op_a, CUBLAS_OP_N, g.m, g.n, g.k, &alpha, g.a, CUDA_R_32F, static_cast<int>(g.lda),
        g.stride_a, g.b, CUDA_R_32F, static_cast<int>(g.ldb), g.stride_b, &beta, g.c, CUDA_R_32F,
        static_cast<int>(g.ldc), g.stride_c, g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  cuda::DeviceBuffer b16 = context.allocate(static_cast<std::size_t>(g.b_count) * 2, "a bf16 copy of attention activations");
  cuda::round_to_bf16(g.b, g.b_count, b16.as<std::uint16_t>(), gpu.stream());
  SWITCHYARD_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      context.cublas(), g.op_a, CUBLAS_OP_N, g.m, g.n, g.k, &alpha, g.a, CUDA_R_16BF, static_cast<int>(g.lda),
      g.stride_a, b16.data(), CUDA_R_16BF, static_cast<int>(g.ldb), g.stride_b, &beta, g.c, CUDA_R_32F,
      static_cast<int>(g.ldc), g.stride_c, g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// A prompt's attention (tokens > 1, never captured): dense cuBLAS products over the keys it sees
// (prefill_attention.h), with a workspace from the pool for the call.
void attend_prompt(GpuRuntime& gpu, const float* q, std::int64_t tokens, std::int64_t heads, std::int64_t qk_dim,
                   std::int64_t v_dim, const float* k_cache, const float* v_cache, std::int64_t kv_heads,
                   std::int64_t position, float scale, float* out) {
  const std::size_t bytes = cuda::prefill_attention_workspace_bytes(tokens, heads, position);
  cuda::DeviceBuffer workspace = gpu.context().allocate(bytes, "the prefill attention's scores");
  cuda::prefill_attention(gpu.context(), q, tokens, heads, qk_dim, v_dim, k_cache, v_cache, kv_heads, position, scale,
                          out, workspace.data(), bytes);
}

}  // namespace

GpuMlaAttention::GpuMlaAttention(const BuildContext& context, const Module& self_attn)
    : MlaProjections(context, self_attn),
      gpu_(as_gpu(context.gpu(context.device_of(self_attn)))),
      max_context_(context.max_context),
      kv_b_(context, context.child(self_attn, "kv_b_proj")) {
  const ModelConfig& c = context.tree.config();
  rope_tables_ = &gpu_->rope_tables(rope_frequencies(c, static_cast<int>(rope_)), max_context_);
  const std::string where = " of " + std::string(self_attn.name);
  {
    const Tensor w = context.param(context.child(self_attn, "kv_b_proj"), "weight", {DType::f32, DType::bf16, DType::f16});
    const std::size_t element = w.dtype() == DType::f32 ? 4 : 2;
    w_uk_t_dtype_ = w.dtype() == DType::f16 ? DType::f32 : w.dtype();
    const std::size_t out_element = w_uk_t_dtype_ == DType::f32 ? 4 : 2;
    std::vector<std::uint8_t> t(static_cast<std::size_t>(heads_ * latent_ * nope_) * out_element);
    const auto* src = static_cast<const std::uint8_t*>(w.data());
    for (std::int64_t h = 0; h < heads_; ++h)
      for (std::int64_t i = 0; i < nope_; ++i)
        for (std::int64_t c = 0; c < latent_; ++c) {
          const std::size_t from = static_cast<std::size_t>(((h * (nope_ + v_dim_) + i) * latent_ + c));
          const std::size_t to = static_cast<std::size_t>((h * latent_ + c) * nope_ + i);
          if (w.dtype() == DType::f16) {
            float f;
            widen_to_f32(DType::f16, src + from * 2, 1, &f);
            std::memcpy(t.data() + to * 4, &f, 4);
          } else {
            std::memcpy(t.data() + to * out_element, src + from * element, element);
          }
        }
    w_uk_t_ = gpu_->context().upload(t.data(), t.size(), "the transposed key rows of kv_b_proj" + where);
    gpu_->context().synchronize();
  }
  // Decode's two projections of x (the queries', or their compression's, and the compressed KV's)
  // in one launch: their weights stacked, each LinearOp still working on its own rows.
  LinearOp* first_projections[] = {has_q_lora_ ? &q_a_ : &q_, &kv_a_};
  stacked_ = LinearOp::stack_on_device(first_projections);
  // Decode's attention kernel for one token (Hopper and later), where it takes these sizes.
  int major = 0;
  SWITCHYARD_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, gpu_->context().device()));
  const KvCacheLayout cache = context.kv_cache();
  cache_dtype_ = cache.dtype;
  if (major >= 9 && cuda::mla_decode_supports(heads_, latent_, rope_, max_context_, cache_dtype_))
    decode_counters_ = gpu_->zeroed_counters(cuda::mla_decode_counter_count(heads_));
  latent_cache_ = make_cache(*gpu_, cache, 0, where);
  rope_cache_ = make_cache(*gpu_, cache, 1, where);
}

void GpuMlaAttention::absorb_queries(const float* q, std::int64_t tokens, float* q_latent) {
  const std::int64_t q_head = nope_ + rope_, rows = nope_ + v_dim_;
  cuda::GemvShape shape;  // decode: per head, latent rows of W_UK^T times that head's q_nope
  shape.tokens = tokens;
  shape.in = nope_;
  shape.rows = heads_ * latent_;
  shape.rows_per_group = latent_;
  shape.weight_group_stride = latent_ * nope_;
  shape.x_group_stride = q_head;
  shape.x_token_stride = heads_ * q_head;
  if (cuda::gemv_supports(shape, w_uk_t_dtype_, w_uk_t_.data(), q)) {
    cuda::gemv(shape, w_uk_t_.data(), w_uk_t_dtype_, q, q_latent, gpu_->stream());
    return;
  }
  // Column t of B (q_nope of head h) at q + t * heads * q_head + h * q_head; A_h = W_UK[h] read
  // column-major as [latent, nope]; C column t at q_latent + t * heads * latent + h * latent.
  gemm_heads(*gpu_, kv_b_.device_dtype(),
             HeadBatch{CUBLAS_OP_N, static_cast<int>(latent_), static_cast<int>(tokens), static_cast<int>(nope_),
                       kv_b_.device_weight(), latent_, rows * latent_, q, heads_ * q_head, q_head,
                       tokens * heads_ * q_head, q_latent, heads_ * latent_, latent_, static_cast<int>(heads_)});
}

void GpuMlaAttention::expand_values(const float* out_latent, std::int64_t tokens, float* attn) {
  const std::int64_t rows = nope_ + v_dim_;
  const std::size_t element = kv_b_.device_dtype() == DType::f32 ? 4 : 2;
  // A_h = W_UV[h], row-major [v_dim, latent]: column-major [latent, v_dim], transposed.
  const void* w_uv = static_cast<const char*>(kv_b_.device_weight()) + static_cast<std::size_t>(nope_ * latent_) * element;
  cuda::GemvShape shape;  // decode: per head, v_dim rows of kv_b_proj times that head's latent
  shape.tokens = tokens;
  shape.in = latent_;
  shape.rows = heads_ * v_dim_;
  shape.rows_per_group = v_dim_;
  shape.weight_group_stride = rows * latent_;
  shape.weight_row_offset = nope_ * latent_;
  shape.x_group_stride = latent_;
  shape.x_token_stride = heads_ * latent_;
  if (cuda::gemv_supports(shape, kv_b_.device_dtype(), kv_b_.device_weight(), out_latent)) {
    cuda::gemv(shape, kv_b_.device_weight(), kv_b_.device_dtype(), out_latent, attn, gpu_->stream());
    return;
  }
  gemm_heads(*gpu_, kv_b_.device_dtype(),
             HeadBatch{CUBLAS_OP_T, static_cast<int>(v_dim_), static_cast<int>(tokens), static_cast<int>(latent_),
                       w_uv, latent_, rows * latent_, out_latent, heads_ * latent_, latent_,
                       tokens * heads_ * latent_, attn, heads_ * v_dim_, v_dim_, static_cast<int>(heads_)});
}

void GpuMlaAttention::project(const float* x, std::int64_t tokens, float* first, float* ckv) {
  LinearOp& first_op = has_q_lora_ ? q_a_ : q_;
  cuda::GemvShape shape;
  shape.tokens = tokens;
  shape.in = first_op.in_features();
  shape.rows = first_op.out_features() + kv_a_.out_features();
  // One token: the stacked rows' outputs are [first | ckv], the two buffers back to back.
  if (tokens == 1 && stacked_ != nullptr && ckv == first + first_op.out_features() &&
      cuda::gemv_supports(shape, first_op.device_dtype(), stacked_, x)) {
    cuda::gemv(shape, stacked_, first_op.device_dtype(), x, first, gpu_->stream());
    return;
  }
  first_op.forward(x, tokens, first);
  kv_a_.forward(x, tokens, ckv);
}

void GpuMlaAttention::attend_one_token(const float* q_latent, const float* q_rope, float* attn) {
  cudaStream_t stream = gpu_->stream();
  if (decode_counters_ == nullptr ||
      !cuda::mla_decode_supports(heads_, latent_, rope_, max_context_, cache_dtype_, q_latent, q_rope,
                                 latent_cache_.data(), rope_cache_.data())) {
    Scratch out_latent(gpu_, heads_ * latent_, "MLA latent output");
    const std::size_t bytes = cuda::mla_attention_workspace_bytes(1, heads_, latent_, max_context_);
    cuda::DeviceBuffer workspace = gpu_->context().allocate(bytes, "the MLA attention workspace");
    cuda::mla_attention(q_latent, q_rope, 1, heads_, latent_, rope_, latent_cache_.data(), rope_cache_.data(),
                        cache_dtype_, gpu_->position(), max_context_, scale_, out_latent, workspace.data(), stream);
    expand_values(out_latent, 1, attn);
    return;
  }
  const std::size_t bytes = cuda::mla_decode_workspace_bytes(heads_, latent_, max_context_);
  cuda::DeviceBuffer workspace = gpu_->context().allocate(bytes, "the MLA decode workspace");
  const cuda::ValueRows value_rows{kv_b_.device_weight(), kv_b_.device_dtype(), (nope_ + v_dim_) * latent_,
                                   nope_ * latent_, v_dim_};
  if (cuda::mla_expand_supports(heads_, latent_, max_context_, value_rows, attn)) {
    // The splits' partials are combined by the value expansion's blocks (no combining block).
    cuda::mla_decode_partials(q_latent, q_rope, heads_, latent_, rope_, latent_cache_.data(), rope_cache_.data(),
                              cache_dtype_, gpu_->position(), max_context_, scale_, workspace.data(), stream);
    cuda::mla_expand_partials(workspace.data(), heads_, latent_, max_context_, gpu_->position(), value_rows, attn,
                              stream);
    return;
  }
  Scratch out_latent(gpu_, heads_ * latent_, "MLA latent output");
  cuda::mla_decode_attention(q_latent, q_rope, heads_, latent_, rope_, latent_cache_.data(), rope_cache_.data(),
                             cache_dtype_, gpu_->position(), max_context_, scale_, out_latent, workspace.data(),
                             decode_counters_, stream);
  expand_values(out_latent, 1, attn);
}

void GpuMlaAttention::forward(const float* x, std::int64_t tokens, std::int64_t position, float* out) {
  check_context(position, tokens, max_context_);
  cudaStream_t stream = gpu_->stream();
  const std::int64_t q_head = nope_ + rope_;
  const std::int64_t first_width = has_q_lora_ ? q_a_.out_features() : heads_ * q_head;
  // [tokens, first_width] then [tokens, latent + rope]: the queries (or their compression) and
  // the compressed KV.
  Scratch projected(gpu_, tokens * (first_width + latent_ + rope_), "MLA projections");
  float* ckv = projected.data() + tokens * first_width;
  project(x, tokens, projected, ckv);
  Scratch q_lora(gpu_, has_q_lora_ ? tokens * heads_ * q_head : 0, "MLA queries");
  float* q = projected;
  if (has_q_lora_) {
    Scratch qa_normed(gpu_, tokens * first_width, "MLA compressed queries");
    q_a_norm_.forward(projected, tokens, qa_normed);
    q_b_.forward(qa_normed, tokens, q_lora);
    q = q_lora;
  }
  // The normalised latent and the rotated rope key of the new tokens go to the cache rows of
  // their positions; decode rotates the queries' rope parts into their own buffer in the same launch.
  const auto layout = RopeLayout::interleaved_to_half_split;  // as the CPU operator, which explains why
  const float* cos = rope_tables_->cos.as<float>();
  const float* sin = rope_tables_->sin.as<float>();
  Scratch q_rope(gpu_, tokens == 1 ? heads_ * rope_ : 0, "MLA rope queries");
  const cuda::MlaQueryRope rope_queries =
      tokens == 1 && rope_ > 0 ? cuda::MlaQueryRope{q + nope_, heads_, heads_ * q_head, q_head, q_rope.data()}
                               : cuda::MlaQueryRope{};
  // Decode absorbs the queries in the same launch where it can (else absorb_queries below).
  Scratch q_latent(gpu_, tokens == 1 ? heads_ * latent_ : 0, "MLA absorbed queries");
  const cuda::MlaAbsorb absorb{w_uk_t_.data(), w_uk_t_dtype_, q, heads_, latent_, nope_, q_head, q_latent.data()};
  const bool absorb_with_caches = cuda::mla_absorb_supported(absorb, tokens);
  cuda::write_mla_caches(ckv, tokens, latent_, rope_, kv_a_norm_.device_weight(), kv_a_norm_.device_dtype(),
                         kv_a_norm_.eps(), cos, sin, layout, gpu_->position(), max_context_, latent_cache_.data(),
                         rope_cache_.data(), cache_dtype_, stream, rope_queries,
                         absorb_with_caches ? absorb : cuda::MlaAbsorb{});
  if (tokens > 1)
    cuda::apply_rope_at(q + nope_, tokens, heads_, heads_ * q_head, q_head, static_cast<int>(rope_), cos, sin,
                        gpu_->position(), layout, stream);

  Scratch attn(gpu_, tokens * heads_ * v_dim_, "MLA attention output");
  if (tokens == 1) {
    // Decode, absorbed: the latent cache is read once per tile of heads, never expanded.
    if (!absorb_with_caches) absorb_queries(q, tokens, q_latent);
    attend_one_token(q_latent, q_rope, attn);
  } else {
    // Prefill, decompressed: keys and values of every position so far, per head.
    const std::int64_t context = position + tokens;
    std::optional<Scratch> latent_f32, rope_f32;  // widened copies of a bf16 cache's rows
    const float* latent_rows = rows_as_f32(*gpu_, latent_cache_, cache_dtype_, context, latent_, latent_f32,
                                           "MLA latent cache rows (f32)");
    const float* rope_rows =
        rows_as_f32(*gpu_, rope_cache_, cache_dtype_, context, rope_, rope_f32, "MLA rope key cache rows (f32)");
    Scratch kv(gpu_, context * heads_ * (nope_ + v_dim_), "MLA decompressed KV");
    kv_b_.forward(latent_rows, context, kv);
    Scratch keys(gpu_, context * heads_ * q_head, "MLA keys"), values(gpu_, context * heads_ * v_dim_, "MLA values");
    cuda::assemble_mla_keys_values(kv, rope_rows, context, heads_, nope_, rope_, v_dim_, keys, values, stream);
    attend_prompt(*gpu_, q, tokens, heads_, q_head, v_dim_, keys, values, heads_, position, scale_, attn);
  }
  o_.forward(attn, tokens, out);
}

GpuGqaAttention::GpuGqaAttention(const BuildContext& context, const Module& self_attn)
    : GqaProjections(context, self_attn),
      gpu_(as_gpu(context.gpu(context.device_of(self_attn)))),
      max_context_(context.max_context) {
  rope_tables_ = &gpu_->rope_tables(rope_frequencies(context.tree.config(), rope_dim_), max_context_);
  const std::string where = " of " + std::string(self_attn.name);
  const KvCacheLayout cache = context.kv_cache();
  cache_dtype_ = cache.dtype;
  k_cache_ = make_cache(*gpu_, cache, 0, where);
  v_cache_ = make_cache(*gpu_, cache, 1, where);
}

void GpuGqaAttention::forward(const float* x, std::int64_t tokens, std::int64_t position, float* out) {
  check_context(position, tokens, max_context_);
  cudaStream_t stream = gpu_->stream();
  const std::int64_t q_width = heads_ * head_dim_, kv_width = kv_heads_ * head_dim_;
  Scratch q(gpu_, tokens * q_width, "queries"), k(gpu_, tokens * kv_width, "keys"), v(gpu_, tokens * kv_width, "values");
  q_.forward(x, tokens, q);
  k_.forward(x, tokens, k);
  v_.forward(x, tokens, v);
  if (q_norm_) {  // RMSNorm over each head's vector before the rotation
    Scratch q_normed(gpu_, tokens * q_width, "normalised queries"), k_normed(gpu_, tokens * kv_width, "normalised keys");
    q_norm_->forward(q, tokens * heads_, q_normed);
    k_norm_->forward(k, tokens * kv_heads_, k_normed);
    cuda::copy_rows(q_normed, q_width, tokens, q_width, q, q_width, stream);
    cuda::copy_rows(k_normed, kv_width, tokens, kv_width, k, kv_width, stream);
  }
  const float* cos = rope_tables_->cos.as<float>();
  const float* sin = rope_tables_->sin.as<float>();
  // The first rope_dim_ dimensions of each head turn (half-split pairs within them); the rest pass.
  cuda::apply_rope_at(q, tokens, heads_, q_width, head_dim_, rope_dim_, cos, sin, gpu_->position(),
                      RopeLayout::half_split, stream);
  cuda::apply_rope_at(k, tokens, kv_heads_, kv_width, head_dim_, rope_dim_, cos, sin, gpu_->position(),
                      RopeLayout::half_split, stream);
  cuda::write_cache_rows(k_cache_.data(), cache_dtype_, kv_width, k, kv_width, tokens, gpu_->position(), max_context_,
                         stream);
  cuda::write_cache_rows(v_cache_.data(), cache_dtype_, kv_width, v, kv_width, tokens, gpu_->position(), max_context_,
                         stream);
  Scratch attn(gpu_, tokens * q_width, "attention output");
  if (tokens > 1) {
    const std::int64_t context = position + tokens;
    std::optional<Scratch> k_f32, v_f32;  // widened copies of a bf16 cache's rows
    const float* k_rows = rows_as_f32(*gpu_, k_cache_, cache_dtype_, context, kv_width, k_f32, "key cache rows (f32)");
    const float* v_rows =
        rows_as_f32(*gpu_, v_cache_, cache_dtype_, context, kv_width, v_f32, "value cache rows (f32)");
    attend_prompt(*gpu_, q, tokens, heads_, head_dim_, head_dim_, k_rows, v_rows, kv_heads_, position, scale_, attn);
  } else {
    const std::size_t bytes = cuda::gqa_attention_workspace_bytes(tokens, heads_, head_dim_, max_context_);
    cuda::DeviceBuffer workspace = gpu_->context().allocate(bytes, "the attention workspace");
    cuda::gqa_attention(q, tokens, heads_, head_dim_, head_dim_, k_cache_.data(), v_cache_.data(), cache_dtype_,
                        kv_heads_, gpu_->position(), max_context_, scale_, attn, workspace.data(), stream);
  }
  o_.forward(attn, tokens, out);
}

}  // namespace switchyard
