// The AVX2 (+FMA, F16C) kernels of the F32/F16/BF16 products, compiled with
// those flags whatever CAIRN_NATIVE says; gemm.cc calls them only where the
// CPU runs them. No std:: templates or header inline functions here (see
// gemm_avx2.h): local helpers in the unnamed namespace instead.
#include "backends/kernels/gemm_avx2.h"

#include <immintrin.h>

namespace cairn::gemm_avx2 {
namespace {

inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

// Bytes ahead of the current position in each row that the row streams
// prefetch. With one row at a time and only the hardware prefetcher, a
// decode step left the bus idle between its requests; four rows at a time
// (kDecodeRows) keep more reads in flight, and then a short distance is
// best: F32, one thread, read-loop fractions of 0.85-0.90 (one row, 1536
// bytes) -> 1.11-1.19 (four rows, 512), 0.96-1.05 (four rows, 1536),
// 1.02-1.07 (four rows, none); bench/decode_bandwidth --clock cpu.
constexpr int64_t kStreamPrefetchBytes = 512;

// Rows a single-token product streams at once. Four interleaved row streams
// took bench-llama-F32's decode from 16.1-18.1 to 22.3-23.5 tokens/s (2
// threads, alternated); the batched steps (2-3 tokens) keep one row.
constexpr int kDecodeRows = 4;

template <Element E>
constexpr int64_t kElementBytes = E == Element::kF32 ? 4 : 2;

// Eight weights of `row` from input k, widened to F32 exactly.
template <Element E>
inline __m256 Load8(const uint8_t* row, int64_t k) {
  if constexpr (E == Element::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * k));
    if constexpr (E == Element::kF16) {
      return _mm256_cvtph_ps(h);
    } else {
      // A bfloat16 is the high half of the F32 with the same bits.
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
}

// One weight as F32 (the inputs past the last multiple of 8).
template <Element E>
inline float Load1(const uint8_t* row, int64_t k) {
  if constexpr (E == Element::kF32) {
    return reinterpret_cast<const float*>(row)[k];
  } else {
    const uint16_t h = reinterpret_cast<const uint16_t*>(row)[k];
    if constexpr (E == Element::kF16) {
      return _cvtsh_ss(h);
    } else {
      return _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(h) << 16)));
    }
  }
}

inline float Sum8(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// y[t * ldy + o] = W[o] . x[t] for rows [r0, r1) and T tokens, R rows at a
// time (rows past the last multiple of R one at a time): each row is read
// once, in order, for all T tokens. Per row and token four accumulators
// take 32 inputs a step (four FMA chains hide the FMA latency), then 8 a
// step, then one at a time: the same operations for an output whatever R,
// T and the range.
template <int R, int T, Element E>
void StreamRowsOf(const FloatRows& w, const float* x, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t K = w.n_in;
  const int64_t k32 = K / 32 * 32, k8 = K / 8 * 8;
  const int64_t stride = static_cast<int64_t>(w.row_bytes);
  int64_t o = r0;
  for (; o + R <= r1; o += R) {
    const uint8_t* row = w.data + o * stride;
    __m256 a[R][T][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) a[r][t][0] = a[r][t][1] = a[r][t][2] = a[r][t][3] = _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < k32; k += 32) {
      // Past a row's end, the same place in the next group's row (the next
      // row is this group's own); past the matrix's end only at its last
      // rows, where a prefetch never faults.
      const int64_t ahead = k * kElementBytes<E> + kStreamPrefetchBytes;
      const int64_t skip = ahead >= stride ? (R - 1) * stride : 0;
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const uint8_t* at = row + r * stride + ahead + skip;
        __builtin_prefetch(at);
        if constexpr (E == Element::kF32) __builtin_prefetch(at + 64);
      }
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const __m256 wv = Load8<E>(row + r * stride, k + 8 * v);
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            a[r][t][v] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + t * K + k + 8 * v), a[r][t][v]);
          }
        }
      }
    }
    for (int64_t k = k32; k < k8; k += 8) {
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256 wv = Load8<E>(row + r * stride, k);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) a[r][t][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + t * K + k), a[r][t][0]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        float sum = Sum8(_mm256_add_ps(_mm256_add_ps(a[r][t][0], a[r][t][1]), _mm256_add_ps(a[r][t][2], a[r][t][3])));
        for (int64_t k = k8; k < K; ++k) sum += Load1<E>(row + r * stride, k) * x[t * K + k];
        y[t * ldy + o + r] = sum;
      }
    }
  }
  if constexpr (R > 1) {
    if (o < r1) StreamRowsOf<1, T, E>(w, x, y, ldy, o, r1);
  }
}

using StreamRowsFn = void (*)(const FloatRows&, const float*, float*, int64_t, int64_t, int64_t);

// StreamRowsOf for T = 1, 2, 3 tokens (16 accumulators at most).
template <Element E>
constexpr StreamRowsFn kStreamRowsByTokens[3] = {&StreamRowsOf<kDecodeRows, 1, E>, &StreamRowsOf<1, 2, E>,
                                                 &StreamRowsOf<1, 3, E>};

template <Element E>
void StreamRange(const FloatRows& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  for (int64_t t0 = 0; t0 < n_tokens; t0 += 3) {
    kStreamRowsByTokens<E>[Min(3, n_tokens - t0) - 1](w, x + t0 * w.n_in, y + t0 * w.n_out, w.n_out, r0, r1);
  }
}

}  // namespace

void StreamRows(const FloatRows& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  switch (w.element) {
    case Element::kF32:
      return StreamRange<Element::kF32>(w, x, n_tokens, y, r0, r1);
    case Element::kF16:
      return StreamRange<Element::kF16>(w, x, n_tokens, y, r0, r1);
    case Element::kBF16:
      return StreamRange<Element::kBF16>(w, x, n_tokens, y, r0, r1);
  }
}

}  // namespace cairn::gemm_avx2
