// The AVX2 K-quant kernels' packed layout (QuantDotKernel::pack,
// packed_dot): weights re-laid out once at load so that a decode step reads
// them the way the prompt panels of quant_dot_kquant_avx2.cc do (8 rows,
// one per int32 lane: no horizontal sums, no per-row header) without the
// panels' per-call fill (a transpose). Each group of 8 rows keeps the bytes
// and place of its 8 GGUF rows, block by block (block b of the group at b
// times 8 GGUF blocks), so a matrix's size and offsets do not change.
// Every output has the bits of the GGUF kernel's `dot` on the same rows:
// the same exact integer sums per block, then AccumulateBlock per lane
// (quant_dot_kquant.h; built with -ffp-contract=off).
//
// 1-4 tokens (decode steps) read the packed blocks directly; from 5 tokens
// on, each packed block fills a PanelBlock (nibble unpacking, no transpose)
// that the shared panel kernel multiplies with every token of a tile.
#include <immintrin.h>

#include <cstring>

#include "backends/kernels/quant_dot_kquant.h"
#include "backends/kernels/quant_dot_kquant_avx2.h"
#include "backends/kernels/quant_dot_kquant_blocks.h"

namespace cairn {
namespace {

// ---------------------------------------------------------------- Q4_K
// Block b of a group of 8 rows, 8 x 144 = 1152 bytes at b * 1152:
//   [0, 1024)     the quants, 32 vectors: vector 8h + j holds in int32 lane
//                 r the GGUF bytes qs[32h + 4j .. 32h + 4j + 3] of row r;
//                 their low nibbles are elements 64h + 4j .. +3 (panel
//                 chunk 16h + j), their high nibbles 32 elements further
//                 (chunk 16h + 8 + j): one load, and / shift, two chunks.
//   [1024, 1056)  byte 4r + i (i < 4): low 4 bits of row r's scale i
//                 (bits 0-3) and scale i + 4 (bits 4-7);
//   [1056, 1088)  the same for the mins;
//   [1088, 1120)  byte 4r + i: bits 4-5 of scale i, scale i + 4, min i and
//                 min i + 4 of row r, in bits 0-1, 2-3, 4-5 and 6-7;
//   [1120, 1136)  d of rows 0-7 (fp16), [1136, 1152) their dmin.
// So four byte vectors (scales 0-3, 4-7, mins 0-3, 4-7: a row per lane)
// come out of three loads and a dozen operations per 8 rows, and one
// vpshufb then gives a group's scale pair (PanelBlock::scale_pair).
constexpr size_t kQ4KBlockBytes = 144;
constexpr size_t kQ4KPackedBlockBytes = kPanelRows * kQ4KBlockBytes;
constexpr size_t kQ4KScalesAt = 1024, kQ4KMinsAt = 1056, kQ4KHighBitsAt = 1088, kQ4KDAt = 1120, kQ4KDminAt = 1136;

// The panel kernel's view of Q4_K (PanelTokens): groups of 32 elements,
// eight chunks' vpmaddubsw pairs summed in int16 (quant_dot_kquant_avx2.cc
// says why that cannot overflow).
struct PanelQ4K {
  static constexpr int kGroupShift = 5, kInt16Chunks = 8;
};

void PackQ4K(const uint8_t* w, int64_t n_rows, int64_t n, uint8_t* out) {
  const int64_t nb = n / kQ8KBlockElems;
  const size_t row_bytes = static_cast<size_t>(nb) * kQ4KBlockBytes;
  for (int64_t r0 = 0; r0 < n_rows; r0 += kPanelRows) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* dst = out + static_cast<size_t>(r0) * row_bytes + static_cast<size_t>(b) * kQ4KPackedBlockBytes;
      for (int r = 0; r < kPanelRows; ++r) {
        const uint8_t* src = w + static_cast<size_t>(r0 + r) * row_bytes + static_cast<size_t>(b) * kQ4KBlockBytes;
        for (int h = 0; h < 4; ++h) {
          for (int j = 0; j < 8; ++j) std::memcpy(dst + 32 * (8 * h + j) + 4 * r, src + 16 + 32 * h + 4 * j, 4);
        }
        uint64_t sc, mn;
        ScalesMinsK4(src + 4, &sc, &mn);
        for (int i = 0; i < 4; ++i) {
          const auto byte = [](uint64_t v, int k) { return static_cast<uint32_t>((v >> (8 * k)) & 0x3F); };
          const uint32_t s_lo = byte(sc, i), s_hi = byte(sc, i + 4), m_lo = byte(mn, i), m_hi = byte(mn, i + 4);
          dst[kQ4KScalesAt + 4 * r + i] = static_cast<uint8_t>((s_lo & 15) | (s_hi & 15) << 4);
          dst[kQ4KMinsAt + 4 * r + i] = static_cast<uint8_t>((m_lo & 15) | (m_hi & 15) << 4);
          dst[kQ4KHighBitsAt + 4 * r + i] =
              static_cast<uint8_t>(s_lo >> 4 | (s_hi >> 4) << 2 | (m_lo >> 4) << 4 | (m_hi >> 4) << 6);
        }
        std::memcpy(dst + kQ4KDAt + 2 * r, src, 2);
        std::memcpy(dst + kQ4KDminAt + 2 * r, src + 2, 2);
      }
    }
  }
}

// Byte i (0-3) of each int32 lane of v, zero-extended, in both int16 halves
// of the lane; i a constant once the callers' loops are unrolled.
CAIRN_KQUANT_INLINE __m256i BytePair(__m256i v, int i) {
  const __m256i lane_base =
      _mm256_setr_epi32(0, 0x00040004, 0x00080008, 0x000C000C, 0, 0x00040004, 0x00080008, 0x000C000C);
  return _mm256_shuffle_epi8(
      v, _mm256_add_epi32(lane_base, _mm256_set1_epi32(static_cast<int>(0x80008000u) | i << 16 | i)));
}

// One packed Q4_K block of 8 rows, unpacked as the panel kernel reads a
// PanelBlock: chunk c (elements 4c..4c+3), group g's scale pair, the int16
// mins of sub-block k in both halves, d and dmin, a row per lane.
struct PackedQ4KBlock {
  const uint8_t* quants;
  __m256i scales[2], mins[2];  // byte 4r + i: scale (min) 4k + i of row r in [k]
  __m256 d, dmin;

  CAIRN_KQUANT_INLINE explicit PackedQ4KBlock(const uint8_t* p) : quants(p) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
    const __m256i s = Load256(p + kQ4KScalesAt), m = Load256(p + kQ4KMinsAt), hi = Load256(p + kQ4KHighBitsAt);
    scales[0] = _mm256_or_si256(_mm256_and_si256(s, low4), _mm256_and_si256(_mm256_slli_epi16(hi, 4), bits45));
    scales[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(s, 4), low4),
                                _mm256_and_si256(_mm256_slli_epi16(hi, 2), bits45));
    mins[0] = _mm256_or_si256(_mm256_and_si256(m, low4), _mm256_and_si256(hi, bits45));
    mins[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(m, 4), low4),
                              _mm256_and_si256(_mm256_srli_epi16(hi, 2), bits45));
    d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kQ4KDAt)));
    dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kQ4KDminAt)));
  }
  CAIRN_KQUANT_INLINE __m256i Chunk(int c) const {
    const __m256i v = Load256(quants + 32 * (8 * (c >> 4) + (c & 7)));
    return _mm256_and_si256(c & 8 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0F));
  }
  CAIRN_KQUANT_INLINE __m256i ScalePair(int g) const { return BytePair(scales[g >> 2], g & 3); }
  CAIRN_KQUANT_INLINE __m256i MinPair(int k) const { return BytePair(mins[k >> 2], k & 3); }
};

// How far ahead of its reads the decode loop prefetches a group's blocks.
constexpr size_t kPackedPrefetchBytes = 4096;

// acc[t] (8 rows' accumulators, a row per lane) += the block's products
// with kTokens tokens whose q8_K blocks are at xb + t * qx_stride: per
// group of 32 elements, eight chunks' vpmaddubsw pairs in int16, one
// vpmaddwd by the group's scale pair (PanelTokens' arithmetic, read from
// the packed block).
template <int kTokens>
CAIRN_KQUANT_INLINE void PackedQ4KBlockTokens(const PackedQ4KBlock& blk, const uint8_t* xb, size_t qx_stride,
                                              __m256* acc) {
  __m256i dot[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) dot[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g) {
    __m256i p[kTokens];
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m256i w = blk.Chunk(8 * g + j);
#pragma GCC unroll 4
      for (int t = 0; t < kTokens; ++t) {
        const __m256i prod = _mm256_maddubs_epi16(w, Broadcast32(xb + t * qx_stride + 4 + 32 * g + 4 * j));
        p[t] = j == 0 ? prod : _mm256_add_epi16(p[t], prod);
      }
    }
    const __m256i sc = blk.ScalePair(g);
#pragma GCC unroll 4
    for (int t = 0; t < kTokens; ++t) dot[t] = _mm256_add_epi32(dot[t], _mm256_madd_epi16(p[t], sc));
  }
  __m256i mins[kTokens];
  PanelMins<kTokens>([&](int k) { return blk.MinPair(k); }, xb, qx_stride, mins);
#pragma GCC unroll 4
  for (int t = 0; t < kTokens; ++t) {
    acc[t] = PanelAccumulate(acc[t], dot[t], mins[t], blk.d, blk.dmin, xb + t * qx_stride);
  }
}

// y[t * ldy + r] for the 8 rows of the packed group at `group` and kTokens
// tokens, block by block.
template <int kTokens>
void PackedQ4KGroupTokens(const uint8_t* group, int64_t nb, const uint8_t* qx, size_t qx_stride, float* y,
                          int64_t ldy) {
  __m256 acc[kTokens];
#pragma GCC unroll 4
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = group + static_cast<size_t>(b) * kQ4KPackedBlockBytes;
    // Past the group's end this is the next group's start; past the
    // matrix's end a prefetch never faults.
#pragma GCC unroll 18
    for (size_t line = 0; line < kQ4KPackedBlockBytes; line += 64) __builtin_prefetch(p + kPackedPrefetchBytes + line);
    PackedQ4KBlockTokens<kTokens>(PackedQ4KBlock(p), qx + b * kQ8KBlockBytes, qx_stride, acc);
  }
#pragma GCC unroll 4
  for (int t = 0; t < kTokens; ++t) _mm256_storeu_ps(y + t * ldy, acc[t]);
}

// A packed block re-laid out as a PanelBlock (for 5 tokens or more).
CAIRN_KQUANT_INLINE void FillPanelFromPackedQ4K(const uint8_t* p, PanelBlock* pb) {
  const PackedQ4KBlock blk(p);
#pragma GCC unroll 64
  for (int c = 0; c < 64; ++c) Store256(pb->q[c], blk.Chunk(c));
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g) {
    Store256(pb->scale_pair[g], blk.ScalePair(g));
    Store256(pb->min_pair[g], blk.MinPair(g));
  }
  _mm256_store_ps(pb->d, blk.d);
  _mm256_store_ps(pb->dmin, blk.dmin);
}

void PackedDotQ4K(const uint8_t* w, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens, int64_t n,
                  float* y, int64_t ldy) {
  const int64_t nb = n / kQ8KBlockElems;
  const size_t row_bytes = static_cast<size_t>(nb) * kQ4KBlockBytes;
  if (n_tokens >= kPanelMinTokens) {
    PanelDot<PanelQ4K>(n_rows, qx, qx_stride, n_tokens, n, y, ldy, [&](int64_t r0, int64_t b, PanelBlock* pb) {
      const uint8_t* p = w + static_cast<size_t>(r0) * row_bytes + static_cast<size_t>(b) * kQ4KPackedBlockBytes;
#pragma GCC unroll 18
      for (size_t line = 0; line < kQ4KPackedBlockBytes; line += 64)
        __builtin_prefetch(p + kPackedPrefetchBytes + line);
      FillPanelFromPackedQ4K(p, pb);
    });
    return;
  }
  for (int64_t r0 = 0; r0 < n_rows; r0 += kPanelRows) {
    const uint8_t* group = w + static_cast<size_t>(r0) * row_bytes;
    float* yr = y + r0;
    switch (n_tokens) {
      case 1:
        PackedQ4KGroupTokens<1>(group, nb, qx, qx_stride, yr, ldy);
        break;
      case 2:
        PackedQ4KGroupTokens<2>(group, nb, qx, qx_stride, yr, ldy);
        break;
      case 3:
        PackedQ4KGroupTokens<3>(group, nb, qx, qx_stride, yr, ldy);
        break;
      default:
        PackedQ4KGroupTokens<4>(group, nb, qx, qx_stride, yr, ldy);
        break;
    }
  }
}

}  // namespace

// The kernel objects of quant_dot_kquant_avx2.cc point at these.
void PackKQuantAvx2Q4K(const uint8_t* w, int64_t n_rows, int64_t n, uint8_t* out) { PackQ4K(w, n_rows, n, out); }
void PackedDotKQuantAvx2Q4K(const uint8_t* w, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
                            int64_t n, float* y, int64_t ldy) {
  PackedDotQ4K(w, n_rows, qx, qx_stride, n_tokens, n, y, ldy);
}

}  // namespace cairn
