// Activations for the quantised kernels (quant_dot.h): x rounded to signed bytes with one float
// scale per block, built once per call and shared by every weight row (and by every call of a
// linear_batch on the same x).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "operators/cpu/kernels/isa.h"
#include "operators/cpu/kernels/quant_dot.h"

namespace switchyard::cpu::detail {
namespace {

using QuantizeBlocksFn = void (*)(const float*, std::int64_t, int, std::int64_t, float*, std::int8_t*, std::int32_t*);

QuantizeBlocksFn quantize_blocks() {
#if defined(SWITCHYARD_CPU_X86)
  if (isa_supported(Isa::avx2)) return quantize_blocks_avx2;
#endif
  return quantize_blocks_scalar;
}

// One token's blocks of `block_inputs` inputs: their d and qs, sizeof(Block) bytes apart; sums16
// gets the sums of each 16 bytes.
template <class Block>
void quantize_token(const float* x, std::int64_t in, int block_inputs, Block* out, std::int32_t* sums16) {
  quantize_blocks()(x, in, block_inputs, static_cast<std::int64_t>(sizeof(Block)), &out->d, out->qs, sums16);
}

}  // namespace

// q = round(v / d) within [-127, 127], as v * (1 / d); fmin/fmax turn a NaN into -127, never an int
// cast of NaN. A block with a NaN gets d = NaN, so that NaN reaches y as it would with f32 x (an
// infinity gives d = inf and q = 0: NaN in y too).
void quantize_blocks_scalar(const float* x, std::int64_t in, int block, std::int64_t block_stride, float* d,
                            std::int8_t* qs, std::int32_t* sums16) {
  for (std::int64_t b = 0; b < in / block; ++b, x += block) {
    float max_abs = 0.0f;
    bool nan = false;
    for (int i = 0; i < block; ++i) {
      max_abs = std::max(max_abs, std::fabs(x[i]));
      nan = nan || std::isnan(x[i]);
    }
    const float scale = nan ? std::numeric_limits<float>::quiet_NaN() : max_abs / 127.0f;
    const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
    auto* block_d = reinterpret_cast<float*>(reinterpret_cast<std::byte*>(d) + b * block_stride);
    auto* block_qs = reinterpret_cast<std::int8_t*>(reinterpret_cast<std::byte*>(qs) + b * block_stride);
    *block_d = scale;
    for (int i = 0; i < block; ++i)
      block_qs[i] = static_cast<std::int8_t>(std::nearbyint(std::fmin(std::fmax(x[i] * inverse, -127.0f), 127.0f)));
    for (int g = 0; g < block / 16; ++g) {
      std::int32_t sum = 0;
      for (int i = 0; i < 16; ++i) sum += block_qs[16 * g + i];
      sums16[b * (block / 16) + g] = sum;
    }
  }
}

std::int64_t activation_bytes(DType weight, std::int64_t in) {
  return takes_q8_k(weight) ? in / quant::kSuperBlock * static_cast<std::int64_t>(sizeof(quant::BlockQ8_K))
                            : in / quant::kBlock * static_cast<std::int64_t>(sizeof(ActivationBlock32));
}

void quantize_activations(DType weight, const float* x, std::int64_t token_begin, std::int64_t token_end,
                          std::int64_t in, std::uint8_t* out) {
  const std::int64_t stride = activation_bytes(weight, in);
  thread_local std::vector<std::int32_t> sums16;
  sums16.resize(static_cast<std::size_t>(in / 16));
  for (std::int64_t t = token_begin; t < token_end; ++t) {
    // out is aligned for the blocks (64 bytes for BlockQ8_K, 4 for ActivationBlock32), and both
    // blocks' sizes are multiples of their alignment.
    std::uint8_t* token = out + t * stride;
    if (takes_q8_k(weight)) {
      auto* blocks = reinterpret_cast<quant::BlockQ8_K*>(token);
      quantize_token(x + t * in, in, quant::kSuperBlock, blocks, sums16.data());
      for (std::int64_t b = 0; b < in / quant::kSuperBlock; ++b)
        for (int g = 0; g < quant::kSuperBlock / 16; ++g)  // |sum| <= 16 * 127
          blocks[b].bsums[g] = static_cast<std::int16_t>(sums16[static_cast<std::size_t>(b * 16 + g)]);
    } else {
      auto* blocks = reinterpret_cast<ActivationBlock32*>(token);
      quantize_token(x + t * in, in, quant::kBlock, blocks, sums16.data());
      for (std::int64_t b = 0; b < in / quant::kBlock; ++b) {
        blocks[b].sum = sums16[static_cast<std::size_t>(2 * b)] + sums16[static_cast<std::size_t>(2 * b + 1)];
        blocks[b].d_sum = blocks[b].d * static_cast<float>(blocks[b].sum);
      }
    }
  }
}

}  // namespace switchyard::cpu::detail
