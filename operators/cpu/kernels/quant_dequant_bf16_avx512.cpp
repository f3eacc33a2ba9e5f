// Block-type weights straight to bf16 panels for the tiles (compiled with AVX512-BF16 besides the
// AVX-512 flags; called only after has_avx512_bf16()). The values are dequantize_rows_avx2's f32
// values, computed by the same IEEE operations lane for lane (fmsub(a * scale, u, b * min) for the
// K types, (a * scale) * v for the IQ types, fmadd(d, u - offset, m) for the 32-weight ones), then
// rounded to nearest-even by vcvtne2ps2bf16: so the panel holds
// cpu::f32_to_bf16(dequantize_rows_avx2(...)) bit for bit, in one pass of 2 bytes a weight.
// (vcvtne2ps2bf16 reads a denormal input as zero where the integer rounding would keep its top
// bits, but no dequantised weight of a half-float scale is an f32 denormal: every term is a
// half-float times integers (or over 8), so every weight is 0, at least 2^-27 in size, infinite or
// NaN. MXFP4's scale goes down to 2^-128: its weights are rounded by integers instead, which is
// exact for them, none being NaN.)
// GCC 12 warns inside its own AVX-512 headers: _mm512_undefined_* initialise a variable from itself.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <algorithm>
#include <bit>

#include "operators/cpu/kernels/kernel_options.h"
#include "operators/cpu/kernels/quant_dot.h"
#include "operators/cpu/kernels/quant_unpack_avx2.h"

namespace switchyard::cpu::detail {
namespace {

// 32 f32 values (lo: the first 16) as 32 bf16 values at out (64 bytes).
inline void store_bf16(std::uint16_t* out, __m512 lo, __m512 hi) {
  _mm512_storeu_si512(out, std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
}

// The same by integers, round to nearest even for every finite and infinite value (subnormals
// included); not for NaN.
inline void store_bf16_by_integers(std::uint16_t* out, __m512 lo, __m512 hi) {
  auto round = [](__m512 v) {
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16));
  };
  _mm512_storeu_si512(out, _mm512_inserti64x4(_mm512_castsi256_si512(round(lo)), round(hi), 1));
}

// 16 bytes of u as 16 f32 values.
inline __m512 bytes_to_floats(__m128i bytes) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes)); }

// Where each 32 weights of a row go in a chunk-major panel (LinearProblem::weight_chunk_rows).
struct PanelRow {
  std::uint16_t* first;  // weights 0-31 of the row
  std::int64_t chunk_step;  // elements from one 32-weight chunk to the next
  std::uint16_t* chunk(std::int64_t c) const { return first + c * chunk_step; }
};
inline PanelRow panel_row(std::uint16_t* out, std::int64_t row, std::int64_t chunk_rows) {
  return PanelRow{out + row * 32, chunk_rows * 32};
}

// One super-block's 256 weights into chunks 8c0 .. 8c0 + 7 of `row`.
template <class Block>
void dequantize_k(const Block& block, const PanelRow& row, std::int64_t c0) {
  const ScalesKVector s = scales_vector(block);
  // a * scale[g] and b * min[g] for the 16 groups, each one IEEE product as the AVX2 code's.
  const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(s.a), _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(s.scale)));
  const __m512 min = _mm512_mul_ps(_mm512_set1_ps(s.b), _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(s.min)));
  alignas(64) std::uint8_t u[quant::kSuperBlock];
  unpack_simd(block, u);
  // Q4_K's and Q5_K's 32-weight sub-blocks are two groups of one scale: one broadcast serves both.
  constexpr bool kPaired = std::is_same_v<Block, BlockQ4_K> || std::is_same_v<Block, BlockQ5_K>;
  for (int g = 0; g < 16; g += 2) {
    const __m512 v0 = bytes_to_floats(_mm_load_si128(reinterpret_cast<const __m128i*>(u + 16 * g)));
    const __m512 v1 = bytes_to_floats(_mm_load_si128(reinterpret_cast<const __m128i*>(u + 16 * g + 16)));
    const __m512 scale0 = _mm512_permutexvar_ps(_mm512_set1_epi32(g), scale);
    const __m512 min0 = _mm512_permutexvar_ps(_mm512_set1_epi32(g), min);
    const __m512 scale1 = kPaired ? scale0 : _mm512_permutexvar_ps(_mm512_set1_epi32(g + 1), scale);
    const __m512 min1 = kPaired ? min0 : _mm512_permutexvar_ps(_mm512_set1_epi32(g + 1), min);
    store_bf16(row.chunk(c0 + g / 2), _mm512_fmsub_ps(scale0, v0, min0), _mm512_fmsub_ps(scale1, v1, min1));
  }
}

// One signed super-block (the IQ types): a * scale[g] * v, the product a * scale[g] first.
template <class Block>
void dequantize_signed_k(const Block& block, const PanelRow& row, std::int64_t c0) {
  const ScalesKVector s = scales_vector(block);
  const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(s.a), _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(s.scale)));
  alignas(64) std::int8_t v[quant::kSuperBlock];
  unpack_simd(block, v);
  for (int g = 0; g < 16; g += 2) {
    const __m512 v0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(v + 16 * g))));
    const __m512 v1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(v + 16 * g + 16))));
    const __m512 scale0 = _mm512_permutexvar_ps(_mm512_set1_epi32(g), scale);
    const __m512 scale1 = _mm512_permutexvar_ps(_mm512_set1_epi32(g + 1), scale);
    store_bf16(row.chunk(c0 + g / 2), _mm512_mul_ps(scale0, v0), _mm512_mul_ps(scale1, v1));
  }
}

// One 32-weight block into chunk c of `row`.
template <class Block>
void dequantize_32(const Block& block, const PanelRow& row, std::int64_t c) {
  const Scales32 s = scales_of(block);
  __m256i u = unpack32(block);
  if constexpr (kSigned32<Block>) u = _mm256_xor_si256(u, _mm256_set1_epi8(static_cast<char>(0x80)));  // v + 128
  const __m512 d = _mm512_set1_ps(s.d), m = _mm512_set1_ps(s.m);
  const __m512i offset = _mm512_set1_epi32(s.offset);
  auto values = [&](__m128i bytes) {
    return _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(bytes), offset)), m);
  };
  if constexpr (std::is_same_v<Block, BlockMXFP4>)
    store_bf16_by_integers(row.chunk(c), values(_mm256_castsi256_si128(u)), values(_mm256_extracti128_si256(u, 1)));
  else
    store_bf16(row.chunk(c), values(_mm256_castsi256_si128(u)), values(_mm256_extracti128_si256(u, 1)));
}

}  // namespace

void dequantize_rows_bf16_avx512(DType dtype, const void* rows, std::int64_t in, std::int64_t count, std::uint16_t* out,
                                 std::int64_t chunk_rows) {
  visit_block_type(dtype, [&](auto tag) {
    using Block = decltype(tag);
    const auto* blocks = static_cast<const Block*>(rows);
    const std::int64_t per_row = in / kElements<Block>, chunks_per_block = kElements<Block> / 32;
    auto block_to = [&](std::int64_t r, std::int64_t b, const PanelRow& row) {
      if constexpr (kSignedK<Block>)
        dequantize_signed_k(blocks[r * per_row + b], row, b * chunks_per_block);
      else if constexpr (kIsK<Block>)
        dequantize_k(blocks[r * per_row + b], row, b * chunks_per_block);
      else
        dequantize_32(blocks[r * per_row + b], row, b);
    };
    if (*kernel_options().panels_by_row) {
      for (std::int64_t r = 0; r < count; ++r)
        for (std::int64_t b = 0; b < per_row; ++b) block_to(r, b, panel_row(out, r, chunk_rows));
      return;
    }
    // A strip of 8 chunks (one super-block, or 8 32-weight blocks) of every row before the next
    // strip, so that the stores run as 8 sequential streams (a chunk's rows one after another)
    // instead of one row's 64-byte pieces 2 KiB apart, which map to two L1 sets. The reads then hop
    // from row to row, 136-272 bytes at a time, which the hardware prefetchers do not follow: each
    // row's next strip is prefetched while this one is converted.
    const std::int64_t strip = kIsK<Block> ? 1 : 8;
    for (std::int64_t b0 = 0; b0 < per_row; b0 += strip) {
      const std::int64_t b1 = std::min(per_row, b0 + strip), b2 = std::min(per_row, b1 + strip);
      for (std::int64_t r = 0; r < count; ++r) {
        for (const auto* p = reinterpret_cast<const char*>(blocks + r * per_row + b1),
                        *end = reinterpret_cast<const char*>(blocks + r * per_row + b2);
             p < end; p += 64)
          _mm_prefetch(p, _MM_HINT_T0);
        const PanelRow row = panel_row(out, r, chunk_rows);
        for (std::int64_t b = b0; b < b1; ++b) block_to(r, b, row);
      }
    }
  });
}

}  // namespace switchyard::cpu::detail
