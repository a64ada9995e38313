// Private to the AVX2 K-quant kernel files (quant_dot_kquant_avx2.cc: GGUF
// rows; quant_dot_kquant_packed_avx2.cc: the layout packed at load): the
// 8-row panel both feed, the panel kernel that multiplies it with tokens,
// and the loop over panels and token tiles. Like quant_dot_kquant_blocks.h,
// everything sits in an unnamed namespace (one copy per including file,
// built with that file's AVX2 flags; see quant_dot_internal.h).
#ifndef CAIRN_BACKENDS_KERNELS_QUANT_DOT_KQUANT_AVX2_H_
#define CAIRN_BACKENDS_KERNELS_QUANT_DOT_KQUANT_AVX2_H_

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/kernels/quant_dot_kquant.h"
#include "backends/kernels/quant_dot_kquant_blocks.h"

namespace cairn {

// The packed layouts of the AVX2 K-quant kernels (QuantDotKernel::pack and
// packed_dot; quant_dot_kquant_packed_avx2.cc), which kQ4_KAvx2, kQ5_KAvx2
// and kQ6_KAvx2 point at.
void PackKQuantAvx2Q4K(const uint8_t* w, int64_t n_rows, int64_t n, uint8_t* out);
void PackedDotKQuantAvx2Q4K(const uint8_t* w, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
                            int64_t n, float* y, int64_t ldy);
void PackKQuantAvx2Q5K(const uint8_t* w, int64_t n_rows, int64_t n, uint8_t* out);
void PackedDotKQuantAvx2Q5K(const uint8_t* w, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
                            int64_t n, float* y, int64_t ldy);
void PackKQuantAvx2Q6K(const uint8_t* w, int64_t n_rows, int64_t n, uint8_t* out);
void PackedDotKQuantAvx2Q6K(const uint8_t* w, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
                            int64_t n, float* y, int64_t ldy);

namespace {  // NOLINT(build/namespaces_headers): one copy per ISA file, on purpose

inline __m256i Load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void Store256(int32_t* p, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(p), v); }
inline __m256i Broadcast32(const uint8_t* p) { return _mm256_set1_epi32(static_cast<int>(Load32(p))); }

// v shifted left by `bits` (right for negative); a constant once unrolled.
CAIRN_KQUANT_INLINE __m256i Shift16(__m256i v, int bits) {
  return bits >= 0 ? _mm256_slli_epi16(v, bits) : _mm256_srli_epi16(v, -bits);
}

// Prompt panels: kPanelRows weight rows, one per int32 lane (below).
constexpr int kPanelRows = 8;

// One block of a prompt panel: a row per int32 lane. The scales are int16
// pairs (a group's scale in both halves of its row's lane), so that one
// vpmaddwd both widens a group's int16 sums and applies its scale.
struct PanelBlock {
  alignas(32) int32_t q[64][kPanelRows];           // [chunk][row]: elements 4c..4c+3
  alignas(32) int32_t scale_pair[16][kPanelRows];  // [group][row]
  alignas(32) int32_t min_pair[8][kPanelRows];     // [k][row]: int16 mins of groups 2k, 2k+1
  alignas(32) float d[kPanelRows];
  alignas(32) float dmin[kPanelRows];
};

// From this many tokens on, GGUF rows are re-laid out into panels
// (quant_dot_kquant_avx2.cc says why).
constexpr int64_t kPanelMinTokens = 5;
constexpr int64_t kMaxPanelTile = 256;  // tokens: their accumulators, 8 KiB, on the stack

// The mins' part of a block for 8 rows (a row per lane) and kTokens tokens
// (q8_K blocks at xb + t * qx_stride): min_pair(k) (int16 mins of groups 2k,
// 2k+1 in each lane) times each token's group sums 2k, 2k+1, summed exactly.
template <int kTokens, class MinPair>
CAIRN_KQUANT_INLINE void PanelMins(MinPair&& min_pair, const uint8_t* xb, size_t qx_stride, __m256i* mins) {
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) mins[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {
    const __m256i m = min_pair(k);
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      mins[t] =
          _mm256_add_epi32(mins[t], _mm256_madd_epi16(m, Broadcast32(xb + t * qx_stride + 4 + kQ8KBlockElems + 4 * k)));
    }
  }
}

// AccumulateBlock for 8 rows (a row per lane) and the token whose q8_K
// block is at xb: (acc + dot * (d * dx)) - mins * (dmin * dx), each
// operation rounded on its own.
CAIRN_KQUANT_INLINE __m256 PanelAccumulate(__m256 acc, __m256i dot, __m256i mins, __m256 d, __m256 dmin,
                                           const uint8_t* xb) {
  float dx;
  std::memcpy(&dx, xb, 4);
  const __m256 vdx = _mm256_set1_ps(dx);
  const __m256 a = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(d, vdx)));
  return _mm256_sub_ps(a, _mm256_mul_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(dmin, vdx)));
}

// acc[t * 8 + r] += W[r] block . X[t] block for the panel's 8 rows and
// kTokens tokens; xb points at the first token's activation block.
// Not inlined: inlined into PanelDot, GCC spilled its accumulators (Q6_K
// prompts ran at half the rate).
template <class K, int kTokens>
__attribute__((noinline)) void PanelTokens(const PanelBlock& pb, const uint8_t* xb, size_t qx_stride, float* acc) {
  constexpr int kChunks = (1 << K::kGroupShift) / 4, kGroups = 256 >> K::kGroupShift;
  constexpr int kInt16Chunks = K::kInt16Chunks;
  __m256i dot[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) dot[t] = _mm256_setzero_si256();
    // Groups not unrolled: unrolled, GCC summed the products as a tree and
    // spilled its partial sums (a third of the instructions were stack moves).
#pragma GCC unroll 1
  for (int g = 0; g < kGroups; ++g) {
    const __m256i sc = _mm256_load_si256(reinterpret_cast<const __m256i*>(pb.scale_pair[g]));
#pragma GCC unroll 4
    for (int c = g * kChunks; c < (g + 1) * kChunks; c += kInt16Chunks) {
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        const uint8_t* xq = xb + t * qx_stride + 4 + 4 * c;
        __m256i p = _mm256_maddubs_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(pb.q[c])), Broadcast32(xq));
#pragma GCC unroll 8
        for (int i = 1; i < kInt16Chunks; ++i) {
          const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(pb.q[c + i]));
          p = _mm256_add_epi16(p, _mm256_maddubs_epi16(w, Broadcast32(xq + 4 * i)));
        }
        // Both int16 halves of a lane are the row's: one vpmaddwd by the
        // paired scale widens and scales them (exact integers).
        dot[t] = _mm256_add_epi32(dot[t], _mm256_madd_epi16(p, sc));
      }
    }
  }
  __m256i mins[kTokens];
  PanelMins<kTokens>([&](int k) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(pb.min_pair[k])); }, xb,
                     qx_stride, mins);
  // AccumulateBlock, a row per lane.
  const __m256 d = _mm256_load_ps(pb.d), dmin = _mm256_load_ps(pb.dmin);
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) {
    _mm256_storeu_ps(acc + 8 * t,
                     PanelAccumulate(_mm256_loadu_ps(acc + 8 * t), dot[t], mins[t], d, dmin, xb + t * qx_stride));
  }
}

// Rows in panels of 8 (n_rows a multiple of 8), tokens in tiles whose
// activations stay in L2 while every panel passes over them; fill(r0, b,
// &pb) lays out block b of rows r0..r0+7 (from GGUF rows or a packed
// layout).
template <class K, class Fill>
void PanelDot(int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens, int64_t n, float* y, int64_t ldy,
              Fill&& fill) {
  const int64_t nb = n / kQ8KBlockElems;
  const int64_t tile = Min(kMaxPanelTile, Max(16, static_cast<int64_t>((1 << 20) / Q8KRowBytes(n)) / 4 * 4));
  alignas(32) float acc[kMaxPanelTile * kPanelRows];
  PanelBlock pb;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += tile) {
    const int64_t t1 = Min(n_tokens, t0 + tile);
    for (int64_t r0 = 0; r0 < n_rows; r0 += kPanelRows) {
      for (int64_t i = 0; i < (t1 - t0) * kPanelRows; ++i) acc[i] = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        fill(r0, b, &pb);
        const uint8_t* xb = qx + b * kQ8KBlockBytes;
        int64_t t = t0;
        for (; t + 4 <= t1; t += 4) PanelTokens<K, 4>(pb, xb + t * qx_stride, qx_stride, &acc[(t - t0) * 8]);
        if (t + 2 <= t1) {
          PanelTokens<K, 2>(pb, xb + t * qx_stride, qx_stride, &acc[(t - t0) * 8]);
          t += 2;
        }
        if (t < t1) PanelTokens<K, 1>(pb, xb + t * qx_stride, qx_stride, &acc[(t - t0) * 8]);
      }
      for (int64_t t = t0; t < t1; ++t) _mm256_storeu_ps(y + t * ldy + r0, _mm256_loadu_ps(&acc[(t - t0) * 8]));
    }
  }
}

}  // namespace
}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_QUANT_DOT_KQUANT_AVX2_H_
