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
// 1-3 tokens (decode steps) read the packed blocks directly; from 4 tokens
// on, each packed block fills a PanelBlock (nibble unpacking, no transpose)
// that the shared panel kernel multiplies with every token of a tile.
#include <immintrin.h>

#include <cstring>

#include "backends/kernels/quant_dot_kquant.h"
#include "backends/kernels/quant_dot_kquant_avx2.h"
#include "backends/kernels/quant_dot_kquant_blocks.h"

namespace cairn {
namespace {

// Vector v of a transposed byte array holds, in int32 lane r, bytes 4v ..
// 4v + 3 of row r's array: PackTransposed writes row r's `bytes` bytes
// from src into the vectors at dst.
void PackTransposed(const uint8_t* src, size_t bytes, int r, uint8_t* dst) {
  for (size_t v = 0; v < bytes / 4; ++v) std::memcpy(dst + 32 * v + 4 * r, src + 4 * v, 4);
}

// The low (or high) nibble of each byte of v.
CAIRN_KQUANT_INLINE __m256i Nibble(__m256i v, bool high) {
  return _mm256_and_si256(high ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0F));
}

// Byte i (0-3) of each int32 lane of v, zero-extended, in both int16
// halves of the lane; i a constant once the callers' loops are unrolled.
CAIRN_KQUANT_INLINE __m256i BytePair(__m256i v, int i) {
  const __m256i lane = _mm256_setr_epi32(0, 0x00040004, 0x00080008, 0x000C000C, 0, 0x00040004, 0x00080008, 0x000C000C);
  return _mm256_shuffle_epi8(v, _mm256_add_epi32(lane, _mm256_set1_epi32(static_cast<int>(0x80008000u) | i << 16 | i)));
}

// Bytes i (low int16 half) and i2 (high half) of each int32 lane of v, as
// signed bytes times 2^(8 - shift).
CAIRN_KQUANT_INLINE __m256i SignedBytePair(__m256i v, int i, int i2, int shift) {
  const __m256i lane = _mm256_setr_epi32(0, 0x04000400, 0x08000800, 0x0C000C00, 0, 0x04000400, 0x08000800, 0x0C000C00);
  const __m256i pick = _mm256_add_epi32(lane, _mm256_set1_epi32(i2 << 24 | 0x800000 | i << 8 | 0x80));
  return _mm256_srai_epi16(_mm256_shuffle_epi8(v, pick), shift);
}

// ---------------------------------------------------------------- Q4_K, Q5_K scales
// The eight 6-bit scales and mins of each of 8 rows in 96 bytes, then
// their fp16 d and dmin in 32:
//   [0, 32)    byte 4r + i (i < 4): low 4 bits of row r's scale i (bits
//              0-3) and scale i + 4 (bits 4-7);
//   [32, 64)   the same for the mins;
//   [64, 96)   byte 4r + i: bits 4-5 of scale i, scale i + 4, min i and
//              min i + 4 of row r, in bits 0-1, 2-3, 4-5 and 6-7;
//   [96, 112)  d of rows 0-7, [112, 128) their dmin.
// Four byte vectors (scales 0-3, 4-7, mins 0-3, 4-7; a row per lane) come
// out of three loads and a dozen operations per 8 rows, and one vpshufb
// then makes a group's scale pair.
constexpr size_t kK4ScalesBytes = 128;

// Row r's part of them, from its GGUF block (d, dmin, 12 packed bytes).
void PackK4Scales(const uint8_t* src, int r, uint8_t* dst) {
  uint64_t sc, mn;
  ScalesMinsK4(src + 4, &sc, &mn);
  const auto six_bits = [](uint64_t v, int k) { return static_cast<uint32_t>((v >> (8 * k)) & 0x3F); };
  for (int i = 0; i < 4; ++i) {
    const uint32_t s_lo = six_bits(sc, i), s_hi = six_bits(sc, i + 4), m_lo = six_bits(mn, i),
                   m_hi = six_bits(mn, i + 4);
    dst[4 * r + i] = static_cast<uint8_t>((s_lo & 15) | (s_hi & 15) << 4);
    dst[32 + 4 * r + i] = static_cast<uint8_t>((m_lo & 15) | (m_hi & 15) << 4);
    dst[64 + 4 * r + i] = static_cast<uint8_t>(s_lo >> 4 | (s_hi >> 4) << 2 | (m_lo >> 4) << 4 | (m_hi >> 4) << 6);
  }
  std::memcpy(dst + 96 + 2 * r, src, 2);
  std::memcpy(dst + 112 + 2 * r, src + 2, 2);
}

// Packed block parts as the panel kernel reads a PanelBlock: group g's
// scale pair, the int16 mins of sub-block k in both halves, d and dmin.
struct PackedK4Scales {
  __m256i scales[2], mins[2];  // byte 4r + i: scale (min) 4k + i of row r in [k]
  __m256 d, dmin;

  CAIRN_KQUANT_INLINE explicit PackedK4Scales(const uint8_t* p) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
    const __m256i s = Load256(p), m = Load256(p + 32), hi = Load256(p + 64);
    scales[0] = _mm256_or_si256(Nibble(s, false), _mm256_and_si256(_mm256_slli_epi16(hi, 4), bits45));
    scales[1] = _mm256_or_si256(Nibble(s, true), _mm256_and_si256(_mm256_slli_epi16(hi, 2), bits45));
    mins[0] = _mm256_or_si256(_mm256_and_si256(m, low4), _mm256_and_si256(hi, bits45));
    mins[1] = _mm256_or_si256(Nibble(m, true), _mm256_and_si256(_mm256_srli_epi16(hi, 2), bits45));
    d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 96)));
    dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 112)));
  }
  CAIRN_KQUANT_INLINE __m256i ScalePair(int g) const { return BytePair(scales[g >> 2], g & 3); }
  CAIRN_KQUANT_INLINE __m256i MinPair(int k) const { return BytePair(mins[k >> 2], k & 3); }
};

// ---------------------------------------------------------------- types
// Each packed type: kGroupShift and kInt16Chunks as the panel kernel reads
// them (quant_dot_kquant_avx2.cc's Q4_K, Q5_K, Q6_K say why the int16 sums
// cannot overflow), the GGUF block size, PackRow (row r's GGUF block into
// the 8 rows' packed block) and Block (a packed block, unpacked a chunk at
// a time: Chunk(c) = elements 4c..4c+3 of each row, a row per lane).

// Q4_K, 8 x 144 = 1152 bytes: the scales (above) in [0, 128), then the
// qs (GGUF bytes 16-143) transposed in [128, 1152): vector 8h + j's low
// nibbles are elements 64h + 4j .. + 3 (chunk 16h + j), its high nibbles
// 32 elements further (chunk 16h + 8 + j).
struct PackedQ4K {
  static constexpr int kGroupShift = 5, kInt16Chunks = 8;
  static constexpr size_t kBlockBytes = 144;
  static constexpr size_t kQsAt = kK4ScalesBytes;
  static void PackRow(const uint8_t* src, int r, uint8_t* dst) {
    PackK4Scales(src, r, dst);
    PackTransposed(src + 16, 128, r, dst + kQsAt);
  }
  struct Block : PackedK4Scales {
    const uint8_t* q;
    CAIRN_KQUANT_INLINE explicit Block(const uint8_t* p) : PackedK4Scales(p), q(p + kQsAt) {}
    CAIRN_KQUANT_INLINE __m256i Chunk(int c) const { return Nibble(Load256(q + 32 * (8 * (c >> 4) + (c & 7))), c & 8); }
  };
};

// Q5_K, 8 x 176 = 1408 bytes: the scales (above) in [0, 128), the qh
// (GGUF bytes 16-47) transposed in [128, 384): bit 2h + u of vector j is
// bit 4 of chunk 16h + 8u + j; the qs as Q4_K's in [384, 1408). In the
// order the kernel first reads them: with the qh after the qs, the kernel
// read two places of each block at once, and one token from memory ran at
// 0.85x the GGUF rows on two threads.
struct PackedQ5K {
  static constexpr int kGroupShift = 5, kInt16Chunks = 4;
  static constexpr size_t kBlockBytes = 176;
  static constexpr size_t kQhAt = kK4ScalesBytes, kQsAt = kQhAt + 256;
  static void PackRow(const uint8_t* src, int r, uint8_t* dst) {
    PackK4Scales(src, r, dst);
    PackTransposed(src + 16, 32, r, dst + kQhAt);
    PackTransposed(src + 48, 128, r, dst + kQsAt);
  }
  struct Block : PackedK4Scales {
    const uint8_t* q;
    CAIRN_KQUANT_INLINE explicit Block(const uint8_t* p) : PackedK4Scales(p), q(p) {}
    CAIRN_KQUANT_INLINE __m256i Chunk(int c) const {
      const int h = c >> 4, u = (c >> 3) & 1, j = c & 7;
      const __m256i bit4 =
          _mm256_and_si256(Shift16(Load256(q + kQhAt + 32 * j), 4 - (2 * h + u)), _mm256_set1_epi8(0x10));
      return _mm256_or_si256(Nibble(Load256(q + kQsAt + 32 * (8 * h + j)), u), bit4);
    }
  };
};

// Q6_K, 8 x 210 = 1680 bytes: the int8 scales (GGUF bytes 192-207)
// transposed in [0, 128): byte 4r + i of vector k is row r's scale 4k + i;
// then per half h (elements 128h ..), at 128 + 768h, the ql (GGUF bytes
// 64h ..) and qh (128 + 32h ..) transposed in the order the kernel reads
// them: ql vector j then qh vector j in line j (j < 8), then ql vectors
// 8-15; d of rows 0-7 (fp16) in [1664, 1680). Chunk 32h + 8s + j: the low
// (s < 2) or high nibble of ql vector 8(s & 1) + j and bits 2s, 2s + 1 of
// qh vector j. Quants are u - 32: the -32 is a min of 32 x scale per group.
struct PackedQ6K {
  static constexpr int kGroupShift = 4, kInt16Chunks = 2;
  static constexpr size_t kBlockBytes = 210;
  static constexpr size_t kHalfBytes = 768;
  // Where ql vector v (v < 16) and qh vector j (j < 8) of half h go.
  static constexpr size_t QlAt(int h, int v) { return 128 + kHalfBytes * h + (v < 8 ? 64 * v : 512 + 32 * (v - 8)); }
  static constexpr size_t QhAt(int h, int j) { return 128 + kHalfBytes * h + 64 * j + 32; }
  static void PackRow(const uint8_t* src, int r, uint8_t* dst) {
    PackTransposed(src + 192, 16, r, dst);
    for (int h = 0; h < 2; ++h) {
      for (int v = 0; v < 16; ++v) PackTransposed(src + 64 * h + 4 * v, 4, r, dst + QlAt(h, v));
      for (int j = 0; j < 8; ++j) PackTransposed(src + 128 + 32 * h + 4 * j, 4, r, dst + QhAt(h, j));
    }
    std::memcpy(dst + 1664 + 2 * r, src + 208, 2);
  }
  struct Block {
    const uint8_t* q;
    __m256i scales[4];
    __m256 d, dmin;
    CAIRN_KQUANT_INLINE explicit Block(const uint8_t* p) : q(p) {
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) scales[k] = Load256(p + 32 * k);
      d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 1664)));
      dmin = d;
    }
    CAIRN_KQUANT_INLINE __m256i Chunk(int c) const {
      const int h = c >> 5, s = (c >> 3) & 3, j = c & 7;
      const __m256i high = _mm256_and_si256(Shift16(Load256(q + QhAt(h, j)), 4 - 2 * s), _mm256_set1_epi8(0x30));
      return _mm256_or_si256(Nibble(Load256(q + QlAt(h, 8 * (s & 1) + j)), s >= 2), high);
    }
    // int16 scale g, sign-extended, in both halves of each lane.
    CAIRN_KQUANT_INLINE __m256i ScalePair(int g) const { return SignedBytePair(scales[g >> 2], g & 3, g & 3, 8); }
    // int16 32 x scale 2k (low half) and 32 x scale 2k + 1 (high half).
    CAIRN_KQUANT_INLINE __m256i MinPair(int k) const {
      return SignedBytePair(scales[k >> 1], 2 * (k & 1), 2 * (k & 1) + 1, 3);
    }
  };
};

// ---------------------------------------------------------------- kernels
template <class P>
constexpr size_t kPackedBlockBytes = kPanelRows* P::kBlockBytes;

template <class P>
void Pack(const uint8_t* w, int64_t n_rows, int64_t n, uint8_t* out) {
  PackGroups<kPanelRows>(w, n_rows, n / kQ8KBlockElems, P::kBlockBytes, out, P::PackRow);
}

// From this many tokens on, packed blocks fill panels (PanelDot); fewer
// run straight from the packed blocks. At 4 tokens the panels are faster
// (bench/quant_dot --tokens 4 from memory, one thread's CPU time, GFLOP/s
// panels vs direct: Q4_K 107-110 vs 106-110, Q5_K 109-112 vs 70-82, Q6_K
// 102-104 vs 95); at 3 slower (Q4_K 95-98 vs 112, Q6_K 69-76 vs 84).
constexpr int64_t kPackedPanelMinTokens = 4;

// How far ahead of its reads a group's loop prefetches the packed blocks
// (past the group's end, the next group's; past the matrix's end a
// prefetch never faults).
constexpr size_t kPackedPrefetchBytes = 4096;

// The cache lines a packed block spans (Q6_K's 1680 bytes end inside one).
template <class P>
constexpr int kPackedBlockLines = static_cast<int>((kPackedBlockBytes<P> + 63) / 64);

// A prefetch of the line at p, issued once `after` is computed: GCC
// gathers plain prefetches (__builtin_prefetch) at the start of a block.
CAIRN_KQUANT_INLINE void PrefetchAfter(const uint8_t* p, __m256i after) {
  asm volatile("prefetcht0 %0" : : "m"(*p), "x"(after));
}

// A prompt panel's fill asks for a whole block at once.
template <class P>
CAIRN_KQUANT_INLINE void PrefetchAhead(const uint8_t* p) {
#pragma GCC unroll 32
  for (int line = 0; line < kPackedBlockLines<P>; ++line) __builtin_prefetch(p + kPackedPrefetchBytes + 64 * line);
}

// acc[t] (8 rows' accumulators, a row per lane) += the block's products
// with kTokens tokens whose q8_K blocks are at xb + t * qx_stride: per
// group, kInt16Chunks chunks' vpmaddubsw pairs summed in int16, then one
// vpmaddwd by the group's scale pair (PanelTokens' arithmetic, read from
// the packed block).
//
// Each group first prefetches its share of the lines of the block at
// `ahead`, so the requests leave evenly through the block's arithmetic.
// Asked for all at once at the block's start instead, one token from
// memory read Q4_K / Q5_K / Q6_K at 0.78-0.84 / 0.70-0.76 / 0.71-0.74 of
// the read loop, evenly at 0.86-0.95 / 0.90-0.97 / 0.99-1.01 (one thread;
// 2 KiB or 8 KiB ahead did no better; bench/decode_bandwidth --clock cpu,
// alternated runs).
template <class P, int kTokens>
CAIRN_KQUANT_INLINE void PackedBlockTokens(const typename P::Block& blk, const uint8_t* ahead, const uint8_t* xb,
                                           size_t qx_stride, __m256* acc) {
  constexpr int kChunks = (1 << P::kGroupShift) / 4, kGroups = 256 >> P::kGroupShift;
  constexpr int kLines = kPackedBlockLines<P>;
  __m256i dot[kTokens];
#pragma GCC unroll 4
  for (int t = 0; t < kTokens; ++t) dot[t] = _mm256_setzero_si256();
#pragma GCC unroll 16
  for (int g = 0; g < kGroups; ++g) {
#pragma GCC unroll 4
    for (int line = g * kLines / kGroups; line < (g + 1) * kLines / kGroups; ++line) {
      PrefetchAfter(ahead + 64 * line, dot[0]);
    }
    const __m256i sc = blk.ScalePair(g);
#pragma GCC unroll 8
    for (int c0 = g * kChunks; c0 < (g + 1) * kChunks; c0 += P::kInt16Chunks) {
      __m256i p[kTokens];
#pragma GCC unroll 8
      for (int i = 0; i < P::kInt16Chunks; ++i) {
        const __m256i w = blk.Chunk(c0 + i);
#pragma GCC unroll 4
        for (int t = 0; t < kTokens; ++t) {
          const __m256i prod = _mm256_maddubs_epi16(w, Broadcast32(xb + t * qx_stride + 4 + 4 * (c0 + i)));
          p[t] = i == 0 ? prod : _mm256_add_epi16(p[t], prod);
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < kTokens; ++t) dot[t] = _mm256_add_epi32(dot[t], _mm256_madd_epi16(p[t], sc));
    }
  }
  __m256i mins[kTokens];
  PanelMins<kTokens>([&](int k) { return blk.MinPair(k); }, xb, qx_stride, mins);
#pragma GCC unroll 4
  for (int t = 0; t < kTokens; ++t)
    acc[t] = PanelAccumulate(acc[t], dot[t], mins[t], blk.d, blk.dmin, xb + t * qx_stride);
}

// y[t * ldy + r] for the 8 rows of the packed group at `group` and kTokens
// tokens, block by block. Not inlined: the single-token loop inlined into
// PackedDot ran Q5_K and Q6_K from memory at 0.7-0.8x their GGUF rows
// (bench/quant_dot --tokens 1, one thread's CPU time; Q6_K 10.5-11.1 GB/s
// inlined, 15.4-16.4 not), though as fast in cache.
template <class P, int kTokens>
__attribute__((noinline)) void PackedGroupTokens(const uint8_t* group, int64_t nb, const uint8_t* qx, size_t qx_stride,
                                                 float* y, int64_t ldy) {
  __m256 acc[kTokens];
#pragma GCC unroll 4
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* p = group + static_cast<size_t>(b) * kPackedBlockBytes<P>;
    PackedBlockTokens<P, kTokens>(typename P::Block(p), p + kPackedPrefetchBytes, qx + b * kQ8KBlockBytes, qx_stride,
                                  acc);
  }
#pragma GCC unroll 4
  for (int t = 0; t < kTokens; ++t) _mm256_storeu_ps(y + t * ldy, acc[t]);
}

// A packed block re-laid out as a PanelBlock (kPackedPanelMinTokens or more).
template <class P>
CAIRN_KQUANT_INLINE void FillPanelFromPacked(const uint8_t* p, PanelBlock* pb) {
  const typename P::Block blk(p);
#pragma GCC unroll 64
  for (int c = 0; c < 64; ++c) Store256(pb->q[c], blk.Chunk(c));
#pragma GCC unroll 16
  for (int g = 0; g < (256 >> P::kGroupShift); ++g) Store256(pb->scale_pair[g], blk.ScalePair(g));
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) Store256(pb->min_pair[k], blk.MinPair(k));
  _mm256_store_ps(pb->d, blk.d);
  _mm256_store_ps(pb->dmin, blk.dmin);
}

template <class P>
void PackedDot(const uint8_t* w, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens, int64_t n,
               float* y, int64_t ldy) {
  const int64_t nb = n / kQ8KBlockElems;
  const size_t row_bytes = static_cast<size_t>(nb) * P::kBlockBytes;
  if (n_tokens >= kPackedPanelMinTokens) {
    PanelDot<P>(n_rows, qx, qx_stride, n_tokens, n, y, ldy, [&](int64_t r0, int64_t b, PanelBlock* pb) {
      const uint8_t* p = w + static_cast<size_t>(r0) * row_bytes + static_cast<size_t>(b) * kPackedBlockBytes<P>;
      PrefetchAhead<P>(p);
      FillPanelFromPacked<P>(p, pb);
    });
    return;
  }
  for (int64_t r0 = 0; r0 < n_rows; r0 += kPanelRows) {
    const uint8_t* group = w + static_cast<size_t>(r0) * row_bytes;
    float* yr = y + r0;
    switch (n_tokens) {
      case 1:
        PackedGroupTokens<P, 1>(group, nb, qx, qx_stride, yr, ldy);
        break;
      case 2:
        PackedGroupTokens<P, 2>(group, nb, qx, qx_stride, yr, ldy);
        break;
      default:
        PackedGroupTokens<P, 3>(group, nb, qx, qx_stride, yr, ldy);
        break;
    }
  }
}

}  // namespace

// The kernel objects of quant_dot_kquant_avx2.cc point at these.
void PackKQuantAvx2Q4K(const uint8_t* w, int64_t n_rows, int64_t n, uint8_t* out) {
  Pack<PackedQ4K>(w, n_rows, n, out);
}
void PackedDotKQuantAvx2Q4K(const uint8_t* w, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
                            int64_t n, float* y, int64_t ldy) {
  PackedDot<PackedQ4K>(w, n_rows, qx, qx_stride, n_tokens, n, y, ldy);
}
void PackKQuantAvx2Q5K(const uint8_t* w, int64_t n_rows, int64_t n, uint8_t* out) {
  Pack<PackedQ5K>(w, n_rows, n, out);
}
void PackedDotKQuantAvx2Q5K(const uint8_t* w, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
                            int64_t n, float* y, int64_t ldy) {
  PackedDot<PackedQ5K>(w, n_rows, qx, qx_stride, n_tokens, n, y, ldy);
}
void PackKQuantAvx2Q6K(const uint8_t* w, int64_t n_rows, int64_t n, uint8_t* out) {
  Pack<PackedQ6K>(w, n_rows, n, out);
}
void PackedDotKQuantAvx2Q6K(const uint8_t* w, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
                            int64_t n, float* y, int64_t ldy) {
  PackedDot<PackedQ6K>(w, n_rows, qx, qx_stride, n_tokens, n, y, ldy);
}

}  // namespace cairn
