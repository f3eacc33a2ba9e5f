#include "operators/cpu/attention.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "operators/cpu/kernels/causal_attention.h"

namespace switchyard {

MlaAttention::MlaAttention(const BuildContext& context, const Module& self_attn)
    : MlaProjections(context, self_attn), max_context_(context.max_context) {
  const ModelConfig& c = context.tree.config();
  // kv_b_proj [heads * (nope + v_dim), latent] splits per head into the key rows (absorbed into
  // the query) and the value rows (absorbed into the output).
  const Module& kv_b = context.child(self_attn, "kv_b_proj");
  const std::vector<float> w = context.param_f32(kv_b, "weight");
  w_uk_.resize(static_cast<std::size_t>(heads_ * nope_ * latent_));
  w_uv_.resize(static_cast<std::size_t>(heads_ * v_dim_ * latent_));
  for (std::int64_t h = 0; h < heads_; ++h) {
    const float* head = w.data() + h * (nope_ + v_dim_) * latent_;
    std::memcpy(w_uk_.data() + h * nope_ * latent_, head, sizeof(float) * static_cast<std::size_t>(nope_ * latent_));
    std::memcpy(w_uv_.data() + h * v_dim_ * latent_, head + nope_ * latent_,
                sizeof(float) * static_cast<std::size_t>(v_dim_ * latent_));
  }
  frequencies_ = rope_frequencies(c, static_cast<int>(rope_));
  const KvCacheLayout cache = context.kv_cache();
  latent_cache_ = cpu::CacheRows(cache, 0);
  rope_cache_ = cpu::CacheRows(cache, 1);
}

void MlaAttention::forward(const float* x, std::int64_t tokens, std::int64_t position, float* out) {
  check_context(position, tokens, max_context_);
  const std::int64_t q_head = nope_ + rope_;
  // Queries: [tokens, heads, nope + rope].
  std::vector<float> q(static_cast<std::size_t>(tokens * heads_ * q_head));
  if (has_q_lora_) {
    std::vector<float> qa(static_cast<std::size_t>(tokens * q_a_.out_features()));
    std::vector<float> qa_normed(qa.size());
    q_a_.forward(x, tokens, qa.data());
    q_a_norm_.forward(qa.data(), tokens, qa_normed.data());
    q_b_.forward(qa_normed.data(), tokens, q.data());
  } else {
    q_.forward(x, tokens, q.data());
  }
  // Compressed KV: [tokens, latent + rope]; the normalised latent and the rotated rope key go to
  // the cache rows of these positions (rounded there when the cache is bf16).
  std::vector<float> ckv(static_cast<std::size_t>(tokens * (latent_ + rope_)));
  kv_a_.forward(x, tokens, ckv.data());
  std::vector<float> latent(static_cast<std::size_t>(tokens * latent_));
  for (std::int64_t t = 0; t < tokens; ++t)
    std::memcpy(latent.data() + t * latent_, ckv.data() + t * (latent_ + rope_), sizeof(float) * static_cast<std::size_t>(latent_));
  std::vector<float> latent_normed(latent.size());
  kv_a_norm_.forward(latent.data(), tokens, latent_normed.data());
  latent_cache_.write(position, tokens, latent_normed.data(), latent_);
  std::vector<float> k_rope(static_cast<std::size_t>(tokens * rope_));  // [tokens, rope]
  for (std::int64_t t = 0; t < tokens; ++t)
    std::memcpy(k_rope.data() + t * rope_, ckv.data() + t * (latent_ + rope_) + latent_, sizeof(float) * static_cast<std::size_t>(rope_));

  std::vector<float> cos(static_cast<std::size_t>(tokens * rope_ / 2)), sin(cos.size());
  rope_cos_sin(frequencies_, position, tokens, cos.data(), sin.data());
  // DeepSeek checkpoints store rope dimensions as interleaved pairs; queries and keys are turned
  // the same way, so their dot products are those of transformers' de-interleaved layout.
  const auto layout = RopeLayout::interleaved_to_half_split;
  cpu::apply_rope(q.data() + nope_, tokens, heads_, heads_ * q_head, q_head, static_cast<int>(rope_), cos.data(),
                  sin.data(), layout);
  cpu::apply_rope(k_rope.data(), tokens, 1, rope_, rope_, static_cast<int>(rope_), cos.data(), sin.data(), layout);
  rope_cache_.write(position, tokens, k_rope.data(), rope_);

  // Absorb: q_latent[t, h] = q_nope[t, h] @ W_UK[h]  ([nope] x [nope, latent]).
  std::vector<float> q_latent(static_cast<std::size_t>(tokens * heads_ * latent_), 0.0f);
  std::vector<float> q_rope(static_cast<std::size_t>(tokens * heads_ * rope_));
  // Threads only pay off past a few hundred thousand multiply-adds; below that a parallel region
  // costs more than it saves (and far more when cores are oversubscribed).
  const bool parallel = tokens * heads_ * nope_ * latent_ > (1 << 18);
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads_; ++h) {
      const float* qn = q.data() + (t * heads_ + h) * q_head;
      float* ql = q_latent.data() + (t * heads_ + h) * latent_;
      for (std::int64_t i = 0; i < nope_; ++i) {
        const float a = qn[i];
        const float* row = w_uk_.data() + (h * nope_ + i) * latent_;
#pragma omp simd
        for (std::int64_t c = 0; c < latent_; ++c) ql[c] += a * row[c];
      }
      std::memcpy(q_rope.data() + (t * heads_ + h) * rope_, qn + nope_, sizeof(float) * static_cast<std::size_t>(rope_));
    }
  std::vector<float> out_latent(q_latent.size());
  cpu::mla_attention(q_latent.data(), q_rope.data(), tokens, heads_, latent_, rope_, latent_cache_.data(),
                     rope_cache_.data(), latent_cache_.dtype(), position, scale_, out_latent.data());
  // Values: attn[t, h, j] = W_UV[h, j] . out_latent[t, h]
  std::vector<float> attn(static_cast<std::size_t>(tokens * heads_ * v_dim_));
#pragma omp parallel for collapse(2) schedule(static) if (tokens * heads_ * v_dim_ * latent_ > (1 << 18))
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t h = 0; h < heads_; ++h) {
      const float* ol = out_latent.data() + (t * heads_ + h) * latent_;
      for (std::int64_t j = 0; j < v_dim_; ++j) {
        const float* row = w_uv_.data() + (h * v_dim_ + j) * latent_;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (std::int64_t c = 0; c < latent_; ++c) sum += row[c] * ol[c];
        attn[static_cast<std::size_t>((t * heads_ + h) * v_dim_ + j)] = sum;
      }
    }
  o_.forward(attn.data(), tokens, out);
}

GqaAttention::GqaAttention(const BuildContext& context, const Module& self_attn)
    : GqaProjections(context, self_attn), max_context_(context.max_context) {
  frequencies_ = rope_frequencies(context.tree.config(), rope_dim_);
  const KvCacheLayout cache = context.kv_cache();
  k_cache_ = cpu::CacheRows(cache, 0);
  v_cache_ = cpu::CacheRows(cache, 1);
}

void GqaAttention::forward(const float* x, std::int64_t tokens, std::int64_t position, float* out) {
  check_context(position, tokens, max_context_);
  const std::int64_t kv_width = kv_heads_ * head_dim_;
  std::vector<float> q(static_cast<std::size_t>(tokens * heads_ * head_dim_));
  std::vector<float> k(static_cast<std::size_t>(tokens * kv_width)), v(k.size());  // [tokens, kv_heads, head_dim]
  q_.forward(x, tokens, q.data());
  k_.forward(x, tokens, k.data());
  v_.forward(x, tokens, v.data());
  if (q_norm_) {  // RMSNorm over each head's vector before the rotation
    std::vector<float> normed(q.size());
    q_norm_->forward(q.data(), tokens * heads_, normed.data());
    q.swap(normed);
    std::vector<float> k_normed(k.size());
    k_norm_->forward(k.data(), tokens * kv_heads_, k_normed.data());
    k.swap(k_normed);
  }
  // The first rope_dim_ dimensions of each head turn (half-split pairs within them); the rest pass.
  std::vector<float> cos(static_cast<std::size_t>(tokens * rope_dim_ / 2)), sin(cos.size());
  rope_cos_sin(frequencies_, position, tokens, cos.data(), sin.data());
  cpu::apply_rope(q.data(), tokens, heads_, heads_ * head_dim_, head_dim_, rope_dim_, cos.data(), sin.data(),
                  RopeLayout::half_split);
  cpu::apply_rope(k.data(), tokens, kv_heads_, kv_width, head_dim_, rope_dim_, cos.data(), sin.data(),
                  RopeLayout::half_split);
  k_cache_.write(position, tokens, k.data(), kv_width);
  v_cache_.write(position, tokens, v.data(), kv_width);
  std::vector<float> attn(q.size());
  cpu::gqa_attention(q.data(), tokens, heads_, head_dim_, k_cache_.data(), v_cache_.data(), k_cache_.dtype(),
                     kv_heads_, position, scale_, attn.data());
  o_.forward(attn.data(), tokens, out);
}

}  // namespace switchyard
