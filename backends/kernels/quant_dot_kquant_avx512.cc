// The K-quant integer dots on AVX-512 (F, BW, VL, VNNI; F16C for the fp16
// block scales). This file is compiled with those target flags whatever
// CAIRN_NATIVE says, so it must only run where the CPU has them: the
// registry checks before handing these kernels out.
//
// Per weight block, the quants are unpacked once into four vectors of 64
// unsigned bytes in element order (so activations load contiguously) and
// the per-group scales into four vectors of 32 int16 lanes. Each group of 64
// then costs two instructions per token: vpmaddubsw (u8 x s8 pairs to int16,
// exact: |pair| <= 2 * 63 * 127) and vpdpwssd (int16 pairs times their scale,
// added to int32 lanes). The int32 lanes become F32 once per block. The part
// that does not depend on the quants (mins, Q6_K's -32) is the group sums of
// the activations times the weights' mins, one vpmaddwd per block.
#include <immintrin.h>

// GCC 12 reports the _mm256_undefined_pd() inside _mm512_reduce_add_ps as
// uninitialized once inlined: a false positive.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <cstring>

#include "backends/kernels/quant_dot_kquant.h"

namespace cairn {
namespace {

// A weight block ready for its products: q[g] holds elements 64g..64g+63,
// s[g] the scale of each int16 lane vpmaddubsw makes of q[g], mins the min of
// each group of 16 elements (lanes of the activation sums).
struct Prepared {
  __m512i q[4];
  __m512i s[4];
  __m256i mins;
  float d, dmin;
};

inline float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Q4_K / Q5_K: eight 6-bit scales and eight 6-bit mins packed in 12 bytes,
// unpacked as two words of eight bytes each.
inline void ScalesMinsK4(const uint8_t* p, uint64_t* sc, uint64_t* mn) {
  const uint32_t a = Load32(p), b = Load32(p + 4), c = Load32(p + 8);
  const uint32_t sc_hi = (c & 0x0f0f0f0f) | ((a >> 2) & 0x30303030);
  const uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0f) | ((b >> 2) & 0x30303030);
  *sc = (a & 0x3f3f3f3f) | (static_cast<uint64_t>(sc_hi) << 32);
  *mn = (b & 0x3f3f3f3f) | (static_cast<uint64_t>(mn_hi) << 32);
}

// Scales of the 32-element sub-blocks: group g's int16 lanes 0..15 take
// sub-block 2g's scale, lanes 16..31 sub-block 2g + 1's.
inline void SubBlockScalesK4(uint64_t sc, uint64_t mn, Prepared* p) {
  const __m512i s16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(sc))));
  for (int g = 0; g < 4; ++g) {
    const __m512i idx = _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(static_cast<short>(2 * g)),
                                                _mm512_set1_epi16(static_cast<short>(2 * g + 1)));
    p->s[g] = _mm512_permutexvar_epi16(idx, s16);
  }
  const __m128i m8 = _mm_cvtsi64_si128(static_cast<long long>(mn));
  p->mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));  // each min twice: two groups of 16
}

// Low nibbles of 32 bytes then their high nibbles: 64 elements in order.
inline __m512i Nibbles(const uint8_t* qs) {
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
  const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
  return _mm512_and_si512(both, _mm512_set1_epi8(0x0F));
}

inline void PrepareQ4_K(const uint8_t* b, Prepared* p) {
  p->d = Half(b);
  p->dmin = Half(b + 2);
  uint64_t sc, mn;
  ScalesMinsK4(b + 4, &sc, &mn);
  SubBlockScalesK4(sc, mn, p);
  for (int g = 0; g < 4; ++g) p->q[g] = Nibbles(b + 16 + 32 * g);
}

inline void PrepareQ5_K(const uint8_t* b, Prepared* p) {
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
  const __m512i hi[4] = {_mm512_and_si512(_mm512_slli_epi16(h, 4), bit4), _mm512_and_si512(_mm512_slli_epi16(h, 2), bit4),
                         _mm512_and_si512(h, bit4), _mm512_and_si512(_mm512_srli_epi16(h, 2), bit4)};
  for (int g = 0; g < 4; ++g) p->q[g] = _mm512_or_si512(Nibbles(b + 48 + 32 * g), hi[g]);
}

// Q6_K: the quants are u - 32 with u in [0, 63]; the offset becomes a min of
// 32 * scale per group at the block scale.
inline void PrepareQ6_K(const uint8_t* b, Prepared* p) {
  p->d = Half(b + 208);
  p->dmin = p->d;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  for (int half = 0; half < 2; ++half) {
    // ql[0..63]: low nibbles are elements 0..63 of the half, high nibbles
    // 64..127; qh[l] holds bits 4-5 of elements l, l+32, l+64, l+96.
    const __m512i l = _mm512_loadu_si512(b + 64 * half);
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * half));
    const __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
    p->q[2 * half] = _mm512_or_si512(_mm512_and_si512(l, low4), _mm512_and_si512(_mm512_slli_epi16(h, 4), bits45));
    p->q[2 * half + 1] =
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4), _mm512_and_si512(h, bits45));
  }
  const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
  // Group g's 128-bit lane k (16 elements) takes scale 4g + k.
  const __m512i lane = _mm512_srli_epi16(
      _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7,
                       6, 5, 4, 3, 2, 1, 0),
      3);
  for (int g = 0; g < 4; ++g) {
    p->s[g] = _mm512_permutexvar_epi16(_mm512_add_epi16(lane, _mm512_set1_epi16(static_cast<short>(4 * g))),
                                       _mm512_castsi256_si512(s16));
  }
  p->mins = _mm256_slli_epi16(s16, 5);
}

size_t Q8KRowBytes(int64_t n) { return static_cast<size_t>(n / kQ8KBlockElems) * kQ8KBlockBytes; }

void QuantizeQ8K(const float* x, int64_t n, uint8_t* qx) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / kQ8KBlockElems; ++b, x += kQ8KBlockElems, qx += kQ8KBlockBytes) {
    __m512 amax = _mm512_setzero_ps();
    // max(|x|, amax) keeps amax where x is NaN, as std::max(amax, |x|) does.
    for (int i = 0; i < kQ8KBlockElems; i += 16) amax = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + i)), amax);
    const float m = _mm512_reduce_max_ps(amax);
    const float d = m / 127.0f;
    const __m512 id = _mm512_set1_ps(m > 0 ? 127.0f / m : 0.0f);
    int16_t sums[16];
    for (int g = 0; g < 16; ++g) {
      __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + 16 * g), id);
      v = _mm512_max_ps(_mm512_min_ps(v, _mm512_set1_ps(127.0f)), _mm512_set1_ps(-127.0f));  // NaN -> 127
      const __m512i q = _mm512_cvtps_epi32(v);  // round to nearest even
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qx + 4 + 16 * g), _mm512_cvtepi32_epi8(q));
      sums[g] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    std::memcpy(qx, &d, 4);
    std::memcpy(qx + 4 + kQ8KBlockElems, sums, sizeof sums);
  }
}

// y[t * ldy] = row . X[t] for kTokens tokens (one row, all blocks).
template <void (*Prepare)(const uint8_t*, Prepared*), size_t kBlockBytes, int kTokens>
void RowTokens(const uint8_t* row, const uint8_t* qx, size_t qx_stride, int64_t nb, float* y, int64_t ldy) {
  __m512 acc[kTokens];
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    Prepared p;
    Prepare(row + b * kBlockBytes, &p);
    for (int t = 0; t < kTokens; ++t) {
      const uint8_t* xb = qx + t * qx_stride + b * kQ8KBlockBytes;
      const __m512i* xq = reinterpret_cast<const __m512i*>(xb + 4);
      // Two chains so that the vpdpwssd latencies overlap.
      __m512i a0 = _mm512_dpwssd_epi32(_mm512_setzero_si512(),
                                       _mm512_maddubs_epi16(p.q[0], _mm512_loadu_si512(xq)), p.s[0]);
      __m512i a1 = _mm512_dpwssd_epi32(_mm512_setzero_si512(),
                                       _mm512_maddubs_epi16(p.q[1], _mm512_loadu_si512(xq + 1)), p.s[1]);
      a0 = _mm512_dpwssd_epi32(a0, _mm512_maddubs_epi16(p.q[2], _mm512_loadu_si512(xq + 2)), p.s[2]);
      a1 = _mm512_dpwssd_epi32(a1, _mm512_maddubs_epi16(p.q[3], _mm512_loadu_si512(xq + 3)), p.s[3]);
      const __m256i m = _mm256_madd_epi16(
          p.mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 4 + kQ8KBlockElems)));
      float dx;
      std::memcpy(&dx, xb, 4);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)), _mm512_set1_ps(p.d * dx), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_zextsi256_si512(m)), _mm512_set1_ps(p.dmin * dx), acc[t]);
    }
  }
  for (int t = 0; t < kTokens; ++t) y[t * ldy] = _mm512_reduce_add_ps(acc[t]);
}

// Tokens go in tiles whose activations stay in L2 while every row passes
// over them; within a tile, each row's blocks are unpacked once per 8 tokens.
template <void (*Prepare)(const uint8_t*, Prepared*), size_t kBlockBytes>
void DotK(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
          int64_t n, float* y, int64_t ldy) {
  const int64_t nb = n / kQ8KBlockElems;
  const int64_t tile = std::max<int64_t>(8, static_cast<int64_t>((256 << 10) / std::max<size_t>(1, Q8KRowBytes(n))) / 8 * 8);
  for (int64_t t0 = 0; t0 < n_tokens; t0 += tile) {
    const int64_t t1 = std::min(n_tokens, t0 + tile);
    for (int64_t r = 0; r < n_rows; ++r) {
      const uint8_t* row = w + r * w_stride;
      int64_t t = t0;
      for (; t + 8 <= t1; t += 8) RowTokens<Prepare, kBlockBytes, 8>(row, qx + t * qx_stride, qx_stride, nb, y + t * ldy + r, ldy);
      if (t + 4 <= t1) {
        RowTokens<Prepare, kBlockBytes, 4>(row, qx + t * qx_stride, qx_stride, nb, y + t * ldy + r, ldy);
        t += 4;
      }
      if (t + 2 <= t1) {
        RowTokens<Prepare, kBlockBytes, 2>(row, qx + t * qx_stride, qx_stride, nb, y + t * ldy + r, ldy);
        t += 2;
      }
      if (t < t1) RowTokens<Prepare, kBlockBytes, 1>(row, qx + t * qx_stride, qx_stride, nb, y + t * ldy + r, ldy);
    }
  }
}

const QuantDotKernel kQ4_K = {GgmlType::kQ4_K, "avx512vnni", kQ8KBlockElems, Q8KRowBytes, QuantizeQ8K,
                              DotK<PrepareQ4_K, 144>};
const QuantDotKernel kQ5_K = {GgmlType::kQ5_K, "avx512vnni", kQ8KBlockElems, Q8KRowBytes, QuantizeQ8K,
                              DotK<PrepareQ5_K, 176>};
const QuantDotKernel kQ6_K = {GgmlType::kQ6_K, "avx512vnni", kQ8KBlockElems, Q8KRowBytes, QuantizeQ8K,
                              DotK<PrepareQ6_K, 210>};

}  // namespace

std::vector<const QuantDotKernel*> KQuantKernelsAvx512Vnni() { return {&kQ4_K, &kQ5_K, &kQ6_K}; }

}  // namespace cairn
