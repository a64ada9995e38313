// The K-quant integer dots on AVX-512 (F, BW, VL, VNNI; F16C for the fp16
// block scales). This file is compiled with those target flags whatever
// CAIRN_NATIVE says, so it must only run where the CPU has them: the
// registry checks before handing these kernels out.
//
// Per weight block, the quants are unpacked once into four vectors of 64
// unsigned bytes in element order (so activations load contiguously) and
// the per-group scales into two vectors of 32 int16 lanes. Per token, each
// group of 64 is one vpdpbusd (u8 x s8, four products to an int32 lane that
// fits in 16 bits), pairs of groups are packed to int16 and multiplied by
// their scales with one vpmaddwd / vpdpwssd: six integer instructions per
// block and token. The part that does not depend on the quants (mins, Q6_K's
// -32) is the group sums of the activations times the weights' mins, one
// vpmaddwd per block. Both int32 vectors are summed to exact integers once
// per block and accumulated in F32 as quant_dot_kquant.h prescribes, so
// that every path and ISA gives the same bits. That is the decode path (1 to
// 15 tokens); prompts take 16-row panels (below), measured at 1.3-1.7x
// cblas_sgemm's F32 rate.
#include <immintrin.h>

#include <cstring>

#include "backends/kernels/quant_dot_kquant.h"
#include "backends/kernels/quant_dot_kquant_blocks.h"

namespace cairn {
namespace {

// The block helpers are small and called per block in the hot loops:
// CAIRN_KQUANT_INLINE (quant_dot_kquant_blocks.h) always inlines them.

// A weight block ready for its products: q[g] holds elements 64g..64g+63 as
// unsigned bytes, s[i] the int16 scales of the products of q[2i] and
// q[2i + 1] in the order PackedSums leaves them, mins the min of each group
// of 16 elements (the lanes of the activation sums).
struct Prepared {
  __m512i q[4];
  __m512i s[2];
  __m256i mins;
  float d, dmin;
};

// vpdpbusd of q[g] with activations gives 16 int32 lanes, lane j the sum of
// elements 64g + 4j .. 64g + 4j + 3 (|sum| <= 4 * 63 * 127 < 2^15);
// vpackssdw of the lanes of q[2i] and q[2i + 1] interleaves them per 128-bit
// lane: int16 lane m of the packed pair covers elements of group
// 2i + (m % 8) / 4, its 32-bit lane 4 (m / 8) + m % 4. The scale of int16
// lane m is therefore that of element 64 (2i + (m % 8) / 4) + 16 (m / 8).
// kSubBlockShift: log2 of the elements one scale covers (5 for Q4_K / Q5_K,
// 4 for Q6_K).
template <int kSubBlockShift>
struct ScaleIndexTable {
  alignas(64) int16_t idx[2][32];
  constexpr ScaleIndexTable() : idx{} {
    for (int i = 0; i < 2; ++i) {
      for (int m = 0; m < 32; ++m) {
        idx[i][m] = static_cast<int16_t>((64 * (2 * i + (m % 8) / 4) + 16 * (m / 8)) >> kSubBlockShift);
      }
    }
  }
};
template <int kSubBlockShift>
constexpr ScaleIndexTable<kSubBlockShift> kScaleIndex;

template <int kSubBlockShift>
CAIRN_KQUANT_INLINE __m512i ScaleIndex(int i) {
  return _mm512_load_si512(kScaleIndex<kSubBlockShift>.idx[i]);
}

CAIRN_KQUANT_INLINE void SubBlockScalesK4(uint64_t sc, uint64_t mn, Prepared* p) {
  const __m512i s16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
  p->s[0] = _mm512_permutexvar_epi16(ScaleIndex<5>(0), s16);
  p->s[1] = _mm512_permutexvar_epi16(ScaleIndex<5>(1), s16);
  const __m128i m8 = _mm_cvtsi64_si128(static_cast<long long>(mn));
  p->mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));  // each min twice: two groups of 16
}

// Low nibbles of 32 bytes then their high nibbles: 64 elements in order.
CAIRN_KQUANT_INLINE __m512i Nibbles(const uint8_t* qs) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
  const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
  return _mm512_and_si512(both, _mm512_set1_epi8(0x0F));
}

CAIRN_KQUANT_INLINE void PrepareQ4_K(const uint8_t* b, Prepared* p) {
  p->d = Half(b);
  p->dmin = Half(b + 2);
  uint64_t sc, mn;
  ScalesMinsK4(b + 4, &sc, &mn);
  SubBlockScalesK4(sc, mn, p);
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) p->q[g] = Nibbles(b + 16 + 32 * g);
}

CAIRN_KQUANT_INLINE void PrepareQ5_K(const uint8_t* b, Prepared* p) {
  p->d = Half(b);
  p->dmin = Half(b + 2);
  uint64_t sc, mn;
  ScalesMinsK4(b + 4, &sc, &mn);
  SubBlockScalesK4(sc, mn, p);
  // Bit 2g of qh[l] is bit 4 of element 64g + l, bit 2g + 1 that of element
  // 64g + 32 + l: with qh >> 1 in the upper half, both are bit 2g of a lane.
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
  const __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 1), 1);
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  p->q[0] = _mm512_or_si512(Nibbles(b + 48), _mm512_and_si512(_mm512_slli_epi16(h, 4), bit4));
  p->q[1] = _mm512_or_si512(Nibbles(b + 80), _mm512_and_si512(_mm512_slli_epi16(h, 2), bit4));
  p->q[2] = _mm512_or_si512(Nibbles(b + 112), _mm512_and_si512(h, bit4));
  p->q[3] = _mm512_or_si512(Nibbles(b + 144), _mm512_and_si512(_mm512_srli_epi16(h, 2), bit4));
}

// Q6_K: the quants are u - 32 with u in [0, 63]; the offset becomes a min of
// 32 * scale per group at the block scale.
CAIRN_KQUANT_INLINE void PrepareQ6_K(const uint8_t* b, Prepared* p) {
  p->d = Half(b + 208);
  p->dmin = p->d;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
#pragma GCC unroll 2
  for (int half = 0; half < 2; ++half) {
    // ql[0..63]: low nibbles are elements 0..63 of the half, high nibbles
    // 64..127; qh[l] holds bits 4-5 of elements l, l+32, l+64, l+96.
    const __m512i l = _mm512_loadu_si512(b + 64 * half);
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * half));
    const __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
    p->q[2 * half] = _mm512_or_si512(_mm512_and_si512(l, low4), _mm512_and_si512(_mm512_slli_epi16(h, 4), bits45));
    p->q[2 * half + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4), _mm512_and_si512(h, bits45));
  }
  const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
  p->s[0] = _mm512_permutexvar_epi16(ScaleIndex<4>(0), _mm512_castsi256_si512(s16));
  p->s[1] = _mm512_permutexvar_epi16(ScaleIndex<4>(1), _mm512_castsi256_si512(s16));
  p->mins = _mm256_slli_epi16(s16, 5);
}

// The scaled integer product of a prepared block with 256 activation quants:
// 16 int32 lanes whose sum is sum_group scale * (u . q).
CAIRN_KQUANT_INLINE __m512i PackedSums(const Prepared& p, const uint8_t* xq) {
  const __m512i z = _mm512_setzero_si512();
  const __m512i d0 = _mm512_dpbusd_epi32(z, p.q[0], _mm512_loadu_si512(xq));
  const __m512i d1 = _mm512_dpbusd_epi32(z, p.q[1], _mm512_loadu_si512(xq + 64));
  const __m512i d2 = _mm512_dpbusd_epi32(z, p.q[2], _mm512_loadu_si512(xq + 128));
  const __m512i d3 = _mm512_dpbusd_epi32(z, p.q[3], _mm512_loadu_si512(xq + 192));
  return _mm512_dpwssd_epi32(_mm512_madd_epi16(_mm512_packs_epi32(d0, d1), p.s[0]), _mm512_packs_epi32(d2, d3), p.s[1]);
}

void QuantizeQ8K(const float* x, int64_t n, uint8_t* qx) {
  for (int64_t b = 0; b < n / kQ8KBlockElems; ++b, x += kQ8KBlockElems, qx += kQ8KBlockBytes) {
    __m512 amax = _mm512_setzero_ps();
    // max(|x|, amax) keeps amax where x is NaN, as std::max(amax, |x|) does.
    for (int i = 0; i < kQ8KBlockElems; i += 16) amax = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + i)), amax);
    const float m = _mm512_reduce_max_ps(amax);
    const float d = m / 127.0f;
    const __m512 id = _mm512_set1_ps(m > 0 ? 127.0f / m : 0.0f);
    int16_t sums[16];
    for (int g = 0; g < 16; ++g) {
      __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + 16 * g), id);
      v = _mm512_max_ps(_mm512_min_ps(v, _mm512_set1_ps(127.0f)), _mm512_set1_ps(-127.0f));  // NaN -> 127
      const __m512i q = _mm512_cvtps_epi32(v);                                               // round to nearest even
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qx + 4 + 16 * g), _mm512_cvtepi32_epi8(q));
      sums[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    std::memcpy(qx, &d, 4);
    std::memcpy(qx + 4 + kQ8KBlockElems, sums, sizeof sums);
  }
}

CAIRN_KQUANT_INLINE __m256i Halves(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// y[t * ldy + r] = W[r] . X[t] for kRows rows and kTokens tokens, over all
// blocks: each weight block is unpacked once for the kTokens tokens, each
// activation block loaded once for the kRows rows. Each block's integer
// products are summed exactly (all pairs of a tile at once where there are
// four or eight), then accumulated as AccumulateBlock does, a pair per lane.
template <void (*Prepare)(const uint8_t*, Prepared*), size_t kBlockBytes, int kRows, int kTokens>
void Tile(const uint8_t* w, size_t w_stride, const uint8_t* qx, size_t qx_stride, int64_t nb, float* y, int64_t ldy) {
  constexpr int kPairs = kRows * kTokens;  // pair i = r * kTokens + t
  static_assert(kPairs == 1 || kPairs == 2 || kPairs == 4 || kPairs == 8);
  alignas(32) float acc[8] = {};
  for (int64_t b = 0; b < nb; ++b) {
    Prepared p[kRows];
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) Prepare(w + r * w_stride + b * kBlockBytes, &p[r]);
    __m256i dots[8], mins[8];
    alignas(32) float d_dx[8], dmin_dx[8];
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      const uint8_t* xb = qx + t * qx_stride + b * kQ8KBlockBytes;
      const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4 + kQ8KBlockElems));
      float dx;
      std::memcpy(&dx, xb, 4);
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const int i = r * kTokens + t;
        dots[i] = Halves(PackedSums(p[r], xb + 4));
        mins[i] = _mm256_madd_epi16(p[r].mins, sums);
        d_dx[i] = p[r].d * dx;
        dmin_dx[i] = p[r].dmin * dx;
      }
    }
    if constexpr (kPairs == 8) {
      const __m256 dot = _mm256_cvtepi32_ps(SumEach(dots)), min = _mm256_cvtepi32_ps(SumEach(mins));
      __m256 a = _mm256_add_ps(_mm256_load_ps(acc), _mm256_mul_ps(dot, _mm256_load_ps(d_dx)));
      a = _mm256_sub_ps(a, _mm256_mul_ps(min, _mm256_load_ps(dmin_dx)));
      _mm256_store_ps(acc, a);
    } else if constexpr (kPairs == 4) {
      const __m256i both[8] = {dots[0], dots[1], dots[2], dots[3], mins[0], mins[1], mins[2], mins[3]};
      const __m256 s = _mm256_cvtepi32_ps(SumEach(both));
      __m128 a = _mm_add_ps(_mm_load_ps(acc), _mm_mul_ps(_mm256_castps256_ps128(s), _mm_load_ps(d_dx)));
      a = _mm_sub_ps(a, _mm_mul_ps(_mm256_extractf128_ps(s, 1), _mm_load_ps(dmin_dx)));
      _mm_store_ps(acc, a);
    } else {
#pragma GCC unroll 2
      for (int i = 0; i < kPairs; ++i) {
        acc[i] = AccumulateBlock(acc[i], ReduceAdd(dots[i]), ReduceAdd(mins[i]), d_dx[i], dmin_dx[i]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) y[t * ldy + r] = acc[r * kTokens + t];
  }
}

// Row pairs by token quads, then what is left (one row, fewer tokens).
template <void (*Prepare)(const uint8_t*, Prepared*), size_t kBlockBytes, int kRows>
void RowsAllTokens(const uint8_t* w, size_t w_stride, const uint8_t* qx, size_t qx_stride, int64_t t0, int64_t t1,
                   int64_t nb, float* y, int64_t ldy) {
  int64_t t = t0;
  for (; t + 4 <= t1; t += 4) {
    Tile<Prepare, kBlockBytes, kRows, 4>(w, w_stride, qx + t * qx_stride, qx_stride, nb, y + t * ldy, ldy);
  }
  if (t + 2 <= t1) {
    Tile<Prepare, kBlockBytes, kRows, 2>(w, w_stride, qx + t * qx_stride, qx_stride, nb, y + t * ldy, ldy);
    t += 2;
  }
  if (t < t1) Tile<Prepare, kBlockBytes, kRows, 1>(w, w_stride, qx + t * qx_stride, qx_stride, nb, y + t * ldy, ldy);
}

// ---------------------------------------------------------------- prompts
// With many tokens, 16 rows go together as a panel whose blocks are
// re-laid out once (per tile of tokens) so that a vector lane is a row:
// q[c][r] holds elements 4c..4c+3 of row r, and one vpdpbusd with four
// activation bytes broadcast does 64 multiply-adds for 16 rows, with no
// horizontal sums. The per-row scales then apply in int32 (vpmulld) once per
// group of 32 (Q4_K, Q5_K) or 16 (Q6_K) elements, the mins with vpdpwssd of
// the activations' group sums, and each lane follows AccumulateBlock: about
// 1.4 instructions per vpdpbusd instead of 4 in the row-wise tiles above.
constexpr int kPanelRows = 16;
constexpr int64_t kPanelMinTokens = 16;
constexpr int64_t kMaxPanelTile = 256;  // tokens: their accumulators, 16 KiB, on the stack

using PanelBlock = PanelBlockOf<kPanelRows>;
using PanelScalesK4 = PanelScalesK4Of<kPanelRows>;
using PanelScalesQ6K = PanelScalesQ6KOf<kPanelRows>;

template <void (*Prepare)(const uint8_t*, Prepared*), size_t kBlockBytes, class Scales>
void FillPanel(const uint8_t* w, size_t w_stride, int64_t b, PanelBlock* pb) {
  alignas(64) uint8_t u[kPanelRows][256];
  for (int r = 0; r < kPanelRows; ++r) {
    const uint8_t* blk = w + r * w_stride + b * kBlockBytes;
    Prepared p;
    Prepare(blk, &p);
#pragma GCC unroll 8
    for (int g = 0; g < 4; ++g) _mm512_store_si512(u[r] + 64 * g, p.q[g]);
    Scales::Fill(blk, r, pb);
  }
  // 16 x 64 dwords to 64 x 16: rows become lanes.
  for (int c = 0; c < 64; ++c) {
    for (int r = 0; r < kPanelRows; ++r) std::memcpy(&pb->q[c][r], u[r] + 4 * c, 4);
  }
}

CAIRN_KQUANT_INLINE __m512i Broadcast32(const uint8_t* p) { return _mm512_set1_epi32(static_cast<int>(Load32(p))); }

// acc[t * 16 + r] += W[r] block . X[t] block for the panel's 16 rows and
// kTokens tokens; xb points at the first token's activation block.
// Not inlined: inlined into PanelDot, GCC spilled its accumulators (Q6_K
// prompts ran at half the rate).
template <int kGroupShift, int kTokens>
__attribute__((noinline)) void PanelTokens(const PanelBlock& pb, const uint8_t* xb, size_t qx_stride, float* acc) {
  constexpr int kChunks = (1 << kGroupShift) / 4, kGroups = 256 >> kGroupShift;
  __m512i dot[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) dot[t] = _mm512_setzero_si512();
#pragma GCC unroll 16
  for (int g = 0; g < kGroups; ++g) {
    __m512i part[kTokens];
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) part[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int c = g * kChunks; c < (g + 1) * kChunks; ++c) {
      const __m512i wq = _mm512_load_si512(pb.q[c]);
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t)
        part[t] = _mm512_dpbusd_epi32(part[t], wq, Broadcast32(xb + t * qx_stride + 4 + 4 * c));
    }
    const __m512i sc = _mm512_load_si512(pb.scale[g]);
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) dot[t] = _mm512_add_epi32(dot[t], _mm512_mullo_epi32(part[t], sc));
  }
  __m512i mins[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) mins[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m512i m = _mm512_load_si512(pb.min_pair[k]);
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      mins[t] = _mm512_dpwssd_epi32(mins[t], m, Broadcast32(xb + t * qx_stride + 4 + kQ8KBlockElems + 4 * k));
    }
  }
  // AccumulateBlock, a row per lane.
  const __m512 d = _mm512_load_ps(pb.d), dmin = _mm512_load_ps(pb.dmin);
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) {
    float dx;
    std::memcpy(&dx, xb + t * qx_stride, 4);
    const __m512 vdx = _mm512_set1_ps(dx);
    __m512 a =
        _mm512_add_ps(_mm512_loadu_ps(acc + 16 * t), _mm512_mul_ps(_mm512_cvtepi32_ps(dot[t]), _mm512_mul_ps(d, vdx)));
    a = _mm512_sub_ps(a, _mm512_mul_ps(_mm512_cvtepi32_ps(mins[t]), _mm512_mul_ps(dmin, vdx)));
    _mm512_storeu_ps(acc + 16 * t, a);
  }
}

// Rows in panels of 16 (n_rows a multiple of 16), tokens in tiles whose
// activations stay in L2 while every panel passes over them.
template <void (*Prepare)(const uint8_t*, Prepared*), size_t kBlockBytes, class Scales>
void PanelDot(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
              int64_t n, float* y, int64_t ldy) {
  constexpr int kShift = Scales::kGroupShift;
  const int64_t nb = n / kQ8KBlockElems;
  const int64_t tile =
      Min(kMaxPanelTile, Max(kPanelMinTokens, static_cast<int64_t>((1 << 20) / Q8KRowBytes(n)) / 8 * 8));
  alignas(64) float acc[kMaxPanelTile * kPanelRows];
  PanelBlock pb;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += tile) {
    const int64_t t1 = Min(n_tokens, t0 + tile);
    for (int64_t r0 = 0; r0 < n_rows; r0 += kPanelRows) {
      for (int64_t i = 0; i < (t1 - t0) * kPanelRows; ++i) acc[i] = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        FillPanel<Prepare, kBlockBytes, Scales>(w + r0 * w_stride, w_stride, b, &pb);
        const uint8_t* xb = qx + b * kQ8KBlockBytes;
        int64_t t = t0;
        for (; t + 8 <= t1; t += 8) PanelTokens<kShift, 8>(pb, xb + t * qx_stride, qx_stride, &acc[(t - t0) * 16]);
        if (t + 4 <= t1) {
          PanelTokens<kShift, 4>(pb, xb + t * qx_stride, qx_stride, &acc[(t - t0) * 16]);
          t += 4;
        }
        if (t + 2 <= t1) {
          PanelTokens<kShift, 2>(pb, xb + t * qx_stride, qx_stride, &acc[(t - t0) * 16]);
          t += 2;
        }
        if (t < t1) PanelTokens<kShift, 1>(pb, xb + t * qx_stride, qx_stride, &acc[(t - t0) * 16]);
      }
      for (int64_t t = t0; t < t1; ++t) _mm512_storeu_ps(y + t * ldy + r0, _mm512_loadu_ps(&acc[(t - t0) * 16]));
    }
  }
}

// Tokens go in tiles whose activations stay in L2 while every row passes
// over them.
template <void (*Prepare)(const uint8_t*, Prepared*), size_t kBlockBytes, class Scales>
void DotK(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
          int64_t n, float* y, int64_t ldy) {
  int64_t r0 = 0;
  if (n_tokens >= kPanelMinTokens && n_rows >= kPanelRows) {
    r0 = n_rows / kPanelRows * kPanelRows;
    PanelDot<Prepare, kBlockBytes, Scales>(w, w_stride, r0, qx, qx_stride, n_tokens, n, y, ldy);
    if (r0 == n_rows) return;
  }
  w += r0 * w_stride;
  y += r0;
  n_rows -= r0;
  const int64_t nb = n / kQ8KBlockElems;
  const int64_t tile = Max(4, static_cast<int64_t>((256 << 10) / Q8KRowBytes(n)) / 4 * 4);
  for (int64_t t0 = 0; t0 < n_tokens; t0 += tile) {
    const int64_t t1 = Min(n_tokens, t0 + tile);
    int64_t r = 0;
    if (t1 - t0 < 4) {
      // Decode: four rows in flight (measured 8% more weight GB/s than two).
      for (; r + 4 <= n_rows; r += 4) {
        if (t1 - t0 == 1) {
          Tile<Prepare, kBlockBytes, 4, 1>(w + r * w_stride, w_stride, qx + t0 * qx_stride, qx_stride, nb,
                                           y + t0 * ldy + r, ldy);
        } else {
          RowsAllTokens<Prepare, kBlockBytes, 2>(w + r * w_stride, w_stride, qx, qx_stride, t0, t1, nb, y + r, ldy);
          RowsAllTokens<Prepare, kBlockBytes, 2>(w + (r + 2) * w_stride, w_stride, qx, qx_stride, t0, t1, nb, y + r + 2,
                                                 ldy);
        }
      }
    }
    for (; r + 2 <= n_rows; r += 2) {
      RowsAllTokens<Prepare, kBlockBytes, 2>(w + r * w_stride, w_stride, qx, qx_stride, t0, t1, nb, y + r, ldy);
    }
    if (r < n_rows)
      RowsAllTokens<Prepare, kBlockBytes, 1>(w + r * w_stride, w_stride, qx, qx_stride, t0, t1, nb, y + r, ldy);
  }
}

}  // namespace

constinit const QuantDotKernel kQ4_KAvx512Vnni = {GgmlType::kQ4_K,
                                                  "avx512vnni",
                                                  kQ8KBlockElems,
                                                  Q8KRowBytes,
                                                  QuantizeQ8K,
                                                  DotK<PrepareQ4_K, 144, PanelScalesK4>,
                                                  true};
constinit const QuantDotKernel kQ5_KAvx512Vnni = {GgmlType::kQ5_K,
                                                  "avx512vnni",
                                                  kQ8KBlockElems,
                                                  Q8KRowBytes,
                                                  QuantizeQ8K,
                                                  DotK<PrepareQ5_K, 176, PanelScalesK4>,
                                                  true};
constinit const QuantDotKernel kQ6_KAvx512Vnni = {GgmlType::kQ6_K,
                                                  "avx512vnni",
                                                  kQ8KBlockElems,
                                                  Q8KRowBytes,
                                                  QuantizeQ8K,
                                                  DotK<PrepareQ6_K, 210, PanelScalesQ6K>,
                                                  true};

}  // namespace cairn
