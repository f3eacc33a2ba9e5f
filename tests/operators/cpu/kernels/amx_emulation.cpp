#include "tests/operators/cpu/kernels/amx_emulation.h"

#include <algorithm>
#include <vector>

#include "operators/cpu/kernels/half.h"
#include "operators/cpu/kernels/quant_dot.h"

namespace switchyard::testing {
namespace {

namespace detail = cpu::detail;

// The word of LinearProblem::x_tiles that holds input k of token t (k % 2: its half), with `chunks`
// = ceil(in / 32): [token tile][chunk][16 pairs of inputs][16 tokens].
constexpr std::int64_t x_tile_word(std::int64_t t, std::int64_t k, std::int64_t chunks) {
  return (((t / 16) * chunks + k / 32) * 16 + (k % 32) / 2) * 16 + t % 16;
}

constexpr detail::BlockFunctions kEmulated{linear_block_tiles_emulated, quant_linear_block_tiles_emulated};

}  // namespace

void linear_block_tiles_emulated(const detail::LinearProblem& p, const detail::LinearBlock& block) {
  if (p.x_tiles == nullptr) return detail::linear_block_scalar(p, block);
  const auto* weight = static_cast<const std::uint16_t*>(p.weight);
  const std::int64_t chunks = (p.in + 31) / 32;
  for (std::int64_t r = block.row_begin; r < block.row_end; ++r)
    for (std::int64_t t = 0; t < p.tokens; ++t) {
      float sum = 0.0f;
      for (std::int64_t k = 0; k < p.in; ++k) {
        const std::uint32_t pair = p.x_tiles[x_tile_word(t, k, chunks)];
        const auto x = static_cast<std::uint16_t>(k % 2 == 0 ? pair & 0xffffu : pair >> 16);
        const std::int64_t at = p.weight_chunk_rows == 0 ? r * p.in + k : ((k / 32) * p.weight_chunk_rows + r) * 32 + k % 32;
        sum += cpu::bf16_to_f32(weight[at]) * cpu::bf16_to_f32(x);
      }
      p.y[t * p.out + r] = sum;
    }
}

void quant_linear_block_tiles_emulated(const detail::LinearProblem& problem, const detail::LinearBlock& block) {
  if (problem.x_tiles == nullptr) return detail::quant_linear_block_scalar(problem, block);
  detail::quant_tiles_block_bf16(problem, block, dequantize_rows_bf16_emulated, linear_block_tiles_emulated);
}

void dequantize_rows_bf16_emulated(DType dtype, const void* rows, std::int64_t in, std::int64_t count,
                                   std::uint16_t* out, std::int64_t chunk_rows) {
  std::vector<float> row(static_cast<std::size_t>(in));
  const auto row_bytes = static_cast<std::int64_t>(storage_bytes(dtype, static_cast<std::uint64_t>(in)));
  for (std::int64_t r = 0; r < count; ++r) {
    detail::dequantize_rows_scalar(dtype, static_cast<const std::uint8_t*>(rows) + r * row_bytes, in, 1, row.data());
    for (std::int64_t k = 0; k < in; ++k) out[((k / 32) * chunk_rows + r) * 32 + k % 32] = cpu::f32_to_bf16(row[k]);
  }
}

void linear_batch_emulating_amx(std::span<const cpu::LinearCall> calls) {
  detail::linear_batch_with(cpu::Isa::amx, kEmulated, calls);
}

void gated_batch_emulating_amx(std::span<const cpu::GatedCall> calls) {
  detail::gated_batch_with(cpu::Isa::amx, kEmulated, calls);
}

}  // namespace switchyard::testing
