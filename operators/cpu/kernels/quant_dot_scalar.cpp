// The quantised kernels' portable variant (quant_dot.h): the baseline the SIMD variants are tested
// against, and the plain decoder of every block type.
#include <algorithm>

#include "operators/cpu/kernels/quant_block_unpack.h"
#include "operators/cpu/kernels/quant_dot.h"

namespace switchyard::cpu::detail {
namespace {

template <class Block>
void dequantize_typed(const Block* blocks, std::int64_t count, float* out) {
  Unpacked<Block> u[kElements<Block>];
  for (std::int64_t i = 0; i < count; ++i, out += kElements<Block>) {
    unpack_scalar(blocks[i], u);
    const auto s = scales_of(blocks[i]);
    if constexpr (kSignedK<Block>) {
      for (int k = 0; k < quant::kSuperBlock; ++k) out[k] = s.a * static_cast<float>(s.scale[k / 16]) * static_cast<float>(u[k]);
    } else if constexpr (kIsK<Block>) {
      for (int k = 0; k < quant::kSuperBlock; ++k)
        out[k] = s.a * static_cast<float>(s.scale[k / 16]) * static_cast<float>(u[k]) -
                 s.b * static_cast<float>(s.min[k / 16]);
    } else {
      for (int k = 0; k < quant::kBlock; ++k) out[k] = s.d * static_cast<float>(u[k] - s.offset) + s.m;
    }
  }
}

// y[t, r] for rows [row_begin, row_end), tokens [token_begin, token_end) (at most kTokenGroup): per block, the integer
// sums against each token's bytes, scaled by the weights' and the token's float scales.
template <class Block>
void rows_typed(const LinearProblem& p, const LinearBlock& block) {
  const auto* weight = static_cast<const Block*>(p.weight);
  const std::int64_t blocks = p.in / kElements<Block>, tokens = block.token_end - block.token_begin;
  float acc[kTokenGroup];
  Unpacked<Block> u[kElements<Block>];
  for (std::int64_t r = block.row_begin; r < block.row_end; ++r) {
    std::fill(acc, acc + tokens, 0.0f);
    for (std::int64_t b = 0; b < blocks; ++b) {
      const Block& w = weight[r * blocks + b];
      unpack_scalar(w, u);
      const auto s = scales_of(w);
      for (std::int64_t t = 0; t < tokens; ++t) {
        const std::uint8_t* x = p.x_quantized + (block.token_begin + t) * p.x_quantized_stride;
        if constexpr (kSignedK<Block>) {
          const auto& xb = reinterpret_cast<const quant::BlockQ8_K*>(x)[b];
          std::int32_t scaled = 0;
          for (int g = 0; g < 16; ++g) {
            std::int32_t dot = 0;
            for (int i = 16 * g; i < 16 * g + 16; ++i) dot += u[i] * xb.qs[i];
            scaled += s.scale[g] * dot;
          }
          acc[t] += xb.d * (s.a * static_cast<float>(scaled));
        } else if constexpr (kIsK<Block>) {
          const auto& xb = reinterpret_cast<const quant::BlockQ8_K*>(x)[b];
          std::int32_t scaled = 0, mins = 0;
          for (int g = 0; g < 16; ++g) {
            std::int32_t dot = 0;
            for (int i = 16 * g; i < 16 * g + 16; ++i) dot += u[i] * xb.qs[i];
            scaled += s.scale[g] * dot;
            mins += s.min[g] * xb.bsums[g];
          }
          acc[t] += xb.d * (s.a * static_cast<float>(scaled) - s.b * static_cast<float>(mins));
        } else {
          const auto& xb = reinterpret_cast<const ActivationBlock32*>(x)[b];
          std::int32_t dot = -s.offset * xb.sum;
          for (int i = 0; i < quant::kBlock; ++i) dot += u[i] * xb.qs[i];
          acc[t] += s.d * xb.d * static_cast<float>(dot) + s.m * xb.d_sum;
        }
      }
    }
    for (std::int64_t t = 0; t < tokens; ++t) p.y[(block.token_begin + t) * p.out + r] = acc[t];
  }
}

void rows_scalar(const LinearProblem& p, const LinearBlock& block) {
  visit_block_type(p.quant_dtype, [&](auto tag) {
    for_token_groups(block, [&](const LinearBlock& group) { rows_typed<decltype(tag)>(p, group); });
  });
}

}  // namespace

void dequantize_rows_scalar(DType dtype, const void* rows, std::int64_t in, std::int64_t count, float* out) {
  visit_block_type(dtype, [&](auto tag) {
    using Block = decltype(tag);
    dequantize_typed(static_cast<const Block*>(rows), count * (in / kElements<Block>), out);
  });
}

void quant_linear_block_scalar(const LinearProblem& problem, const LinearBlock& block) {
  if (problem.x_quantized != nullptr) return rows_scalar(problem, block);
  quant_prefill_block(problem, block, dequantize_rows_scalar, linear_block_scalar);
}

}  // namespace switchyard::cpu::detail
