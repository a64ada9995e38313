// The AVX-512 (F, BW, VL; F16C) kernels of the F32/F16 products, compiled
// with those flags whatever CAIRN_NATIVE says; gemm.cc calls them only where
// the CPU runs them. No std:: templates or header inline functions here
// (std::min, std::vector, WeightMatrix::row_bytes ...): their out-of-line
// copies are shared by every file at link time, and this file's would use
// instructions other CPUs lack (gemm_avx512.h). Local helpers in the unnamed
// namespace instead.
#include "backends/kernels/gemm_avx512.h"

#include <immintrin.h>

namespace cairn::gemm_avx512 {
namespace {

inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

// How far ahead PackPanel prefetches each weight row.
constexpr int64_t kPackPrefetchBytes = 512;

// 16 x 16 transpose of r[0..15] in registers (row i becomes column i).
inline void Transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  // Now 128-bit lane L of r[4a + b] holds column 4L + b of rows 4a .. 4a + 3:
  // a 4 x 4 transpose of 128-bit lanes across r[b], r[4 + b], r[8 + b],
  // r[12 + b] puts column c in r[c].
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xDD);
  }
}

// 16 consecutive weights of `row` from input k as F32 (F16 widened exactly);
// `valid` < 16 loads only that many (the rest zero).
inline __m512 LoadWeights(const uint8_t* row, bool f16, int64_t k, int valid) {
  const __mmask16 m = valid >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << valid) - 1);
  if (f16) {
    const __m256i h = _mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k);
    return _mm512_cvtph_ps(h);
  }
  return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
}

// Weight panel: rows o0 .. o0 + kOuts - 1 (rows past n_out are zero), inputs
// k0 .. k0 + kc - 1, stored input-major: wp[k][r], so the kernel loads the
// panel's kOuts weights of one input as two vectors.
void PackPanel(const FloatRows& w, int64_t o0, int64_t k0, int64_t kc, float* wp) {
  const bool f16 = w.f16;
  const size_t rb = w.row_bytes;
  for (int half = 0; half < kOuts / 16; ++half) {
    const uint8_t* rows[16];
    bool live[16];
    for (int r = 0; r < 16; ++r) {
      const int64_t o = o0 + half * 16 + r;
      live[r] = o < w.n_out;
      rows[r] = w.data + (live[r] ? o : 0) * rb;
    }
    for (int64_t k = 0; k < kc; k += 16) {
      const int valid = static_cast<int>(Min(16, kc - k));
      __m512 v[16];
      // The 16 rows are 16 streams the hardware prefetcher follows poorly:
      // fetch each one kPackPrefetchBytes ahead (never faults past the end).
      const int64_t ahead = (k0 + k) * (f16 ? 2 : 4) + kPackPrefetchBytes;
      for (int r = 0; r < 16; ++r) __builtin_prefetch(rows[r] + ahead);
      for (int r = 0; r < 16; ++r) v[r] = live[r] ? LoadWeights(rows[r], f16, k0 + k, valid) : _mm512_setzero_ps();
      Transpose16(v);
      for (int j = 0; j < valid; ++j) _mm512_store_ps(wp + (k + j) * kOuts + half * 16, v[j]);
    }
  }
}

// y[t][o] (+)= sum over the block's inputs for the kTokens x kOuts block:
// `rows` tokens and `cols` outputs of it are real. `add`: y holds the sums
// of the earlier input blocks.
void Kernel(const float* xp, const float* wp, int64_t kc, float* y, int64_t ldy, int rows, int cols, bool add) {
  constexpr int V = kOuts / 16;
  __m512 c[kTokens][V];
#pragma GCC unroll 16
  for (int i = 0; i < kTokens; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) c[i][v] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    __m512 wv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) wv[v] = _mm512_load_ps(wp + k * kOuts + 16 * v);
    const float* b = xp + k * kTokens;
#pragma GCC unroll 16
    for (int i = 0; i < kTokens; ++i) {
      const __m512 bi = _mm512_set1_ps(b[i]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) c[i][v] = _mm512_fmadd_ps(wv[v], bi, c[i][v]);
    }
  }
  __mmask16 m[V];
  for (int v = 0; v < V; ++v) {
    const int n = cols - 16 * v;
    m[v] = n >= 16 ? static_cast<__mmask16>(0xFFFF) : n > 0 ? static_cast<__mmask16>((1u << n) - 1) : 0;
  }
#pragma GCC unroll 16
  for (int i = 0; i < kTokens; ++i) {
    if (i >= rows) break;
    float* yi = y + i * ldy;
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      if (add) c[i][v] = _mm512_add_ps(c[i][v], _mm512_maskz_loadu_ps(m[v], yi + 16 * v));
      _mm512_mask_storeu_ps(yi + 16 * v, m[v], c[i][v]);
    }
  }
}

// Bytes ahead of the current position that StreamRows prefetches: the
// hardware prefetcher alone leaves the bus idle between its requests.
constexpr int64_t kStreamPrefetchBytes = 2048;

// 16 weights of `row` from input k widened to F32, `m` selecting the real ones.
template <bool kF16>
inline __m512 Load16(const uint8_t* row, int64_t k, __mmask16 m) {
  if constexpr (kF16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k));
  } else {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
  }
}

// y[t * ldy + o] = W[o] . x[t] for rows [r0, r1) and T tokens: each row is
// read once, in order, for all T tokens (whose activations stay in L1), 32
// inputs per step on two accumulators per token.
template <int T, bool kF16>
void StreamRowsOf(const FloatRows& w, const float* x, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t K = w.n_in;
  const size_t rb = w.row_bytes;
  const int64_t k_main = K / 32 * 32;
  for (int64_t o = r0; o < r1; ++o) {
    const uint8_t* row = w.data + o * rb;
    __m512 a[T][2];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) a[t][0] = a[t][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < k_main; k += 32) {
      // Past the matrix's end only at its last rows: a prefetch never faults.
      __builtin_prefetch(row + k * (kF16 ? 2 : 4) + kStreamPrefetchBytes);
      if constexpr (!kF16) __builtin_prefetch(row + k * 4 + 64 + kStreamPrefetchBytes);
      const __m512 w0 = Load16<kF16>(row, k, 0xFFFF), w1 = Load16<kF16>(row, k + 16, 0xFFFF);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        a[t][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + t * K + k), a[t][0]);
        a[t][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + t * K + k + 16), a[t][1]);
      }
    }
    for (int64_t k = k_main; k < K; k += 16) {
      const int n = static_cast<int>(Min(16, K - k));
      const __mmask16 m = n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
      const __m512 wv = Load16<kF16>(row, k, m);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) a[t][0] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + t * K + k), a[t][0]);
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) y[t * ldy + o] = _mm512_reduce_add_ps(_mm512_add_ps(a[t][0], a[t][1]));
  }
}

template <bool kF16>
void StreamRange(const FloatRows& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  // One pass over the rows for up to 3 tokens at a time.
  for (int64_t t0 = 0; t0 < n_tokens; t0 += 3) {
    const float* xt = x + t0 * w.n_in;
    float* yt = y + t0 * w.n_out;
    switch (Min(3, n_tokens - t0)) {
      case 1:
        StreamRowsOf<1, kF16>(w, xt, yt, w.n_out, r0, r1);
        break;
      case 2:
        StreamRowsOf<2, kF16>(w, xt, yt, w.n_out, r0, r1);
        break;
      default:
        StreamRowsOf<3, kF16>(w, xt, yt, w.n_out, r0, r1);
        break;
    }
  }
}

}  // namespace

void PackTokens(const float* x, int64_t n_tokens, int64_t K, int64_t tb, float* xp) {
  float* dst = xp + tb * K * kTokens;
  const int64_t t0 = tb * kTokens;
  const float* src[kTokens];
  int live = 0;
  for (int i = 0; i < kTokens; ++i) {
    if (t0 + i < n_tokens) live = i + 1;
    src[i] = x + Min(t0 + i, n_tokens - 1) * K;
  }
  // Input-major, so the writes go in order and the reads are kTokens streams.
  for (int64_t k = 0; k < K; ++k) {
#pragma GCC unroll 16
    for (int i = 0; i < kTokens; ++i) dst[k * kTokens + i] = i < live ? src[i][k] : 0.0f;
  }
}

void GemmPanels(const FloatRows& w, const float* xp, int64_t n_tokens, float* y, int64_t block_in, int64_t group,
                int64_t p_begin, int64_t p_end, float* wp) {
  const int64_t K = w.n_in;
  const int64_t n_tb = (n_tokens + kTokens - 1) / kTokens;
  for (int64_t g0 = p_begin; g0 < p_end; g0 += group) {
    const int64_t g1 = Min(p_end, g0 + group);
    for (int64_t k0 = 0; k0 < K; k0 += block_in) {
      const int64_t kc = Min(block_in, K - k0);
      for (int64_t p = g0; p < g1; ++p) {
        const int64_t o0 = p * kOuts;
        const int cols = static_cast<int>(Min(kOuts, w.n_out - o0));
        PackPanel(w, o0, k0, kc, wp);
        for (int64_t tb = 0; tb < n_tb; ++tb) {
          const int rows = static_cast<int>(Min(kTokens, n_tokens - tb * kTokens));
          Kernel(xp + (tb * K + k0) * kTokens, wp, kc, y + tb * kTokens * w.n_out + o0, w.n_out, rows, cols, k0 > 0);
        }
      }
    }
  }
}

void StreamRows(const FloatRows& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  if (w.f16) {
    StreamRange<true>(w, x, n_tokens, y, r0, r1);
  } else {
    StreamRange<false>(w, x, n_tokens, y, r0, r1);
  }
}

}  // namespace cairn::gemm_avx512
