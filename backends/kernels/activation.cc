#include "backends/kernels/activation.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace cairn {

namespace {

#if defined(__AVX2__) && defined(__FMA__)
// e^x for 8 lanes: x = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor
// series to r^7 (the next term is below 1e-8 relative), 2^(n-1) built in
// the exponent field and doubled (n reaches 128 at x = 88.7). Within 2 ulp
// of libm's expf; x > 88.72 is +inf as there, but results below e^-87
// (denormals) are 0: its callers add e^x to at least 1 (SiLU's 1 + e^-g,
// softmax's sum, whose largest term is e^0), where they round away.
inline __m256 ExpFlushingTiny(__m256 x) {
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693145751953125f), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // n in [-125, 128] here (out of range lanes are replaced below).
  const __m256i n_int = _mm256_cvtps_epi32(_mm256_max_ps(n, _mm256_set1_ps(-125.0f)));
  const __m256 half_scale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n_int, _mm256_set1_epi32(126)), 23));
  const __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, half_scale), _mm256_set1_ps(2.0f));
  const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
  const __m256 huge = _mm256_cmp_ps(x, _mm256_set1_ps(88.72283935546875f), _CMP_GT_OQ);
  return _mm256_blendv_ps(_mm256_andnot_ps(tiny, e), _mm256_set1_ps(std::numeric_limits<float>::infinity()), huge);
}

// silu(g) = g / (1 + e^-g) for 8 lanes (NaN stays NaN through g).
inline __m256 Silu8(__m256 g) {
  const __m256 e = ExpFlushingTiny(_mm256_xor_ps(g, _mm256_set1_ps(-0.0f)));
  return _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

// x[i] = f(x[i]) 8 lanes at a time, the tail through a zero-padded copy: an
// element's result does not depend on its position or on n.
template <class F>
void MapInPlace8(float* x, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, f(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float tail[8] = {};
    std::memcpy(tail, x + i, static_cast<size_t>(n - i) * sizeof(float));
    _mm256_storeu_ps(tail, f(_mm256_loadu_ps(tail)));
    std::memcpy(x + i, tail, static_cast<size_t>(n - i) * sizeof(float));
  }
}
#endif

}  // namespace

// Vectorized where the build has AVX2: SiLU is a few percent of a prompt
// with libm's scalar expf.
void SiluInPlace(float* x, int64_t n) {
#if defined(__AVX2__) && defined(__FMA__)
  MapInPlace8(x, n, Silu8);
#else
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
#endif
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_mul_ps(Silu8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  }
  if (i < n) {
    float tail[8] = {};
    std::memcpy(tail, gate + i, static_cast<size_t>(n - i) * sizeof(float));
    SiluInPlace(tail, 8);
    for (int64_t k = 0; k < n - i; ++k) out[i + k] = tail[k] * up[i + k];
  }
#else
  for (; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
#endif
}

void GeGlu(const float* gate, const float* up, int64_t n, float* out) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    const float g = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
    out[i] = g * up[i];
  }
}

void SwiGluOai(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    out[i] = g / (1.0f + std::exp(alpha * (-g))) * (u + 1.0f);
  }
}

void ReluSquared(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float r = x[i] > 0.0f ? x[i] : 0.0f;
    out[i] = r * r;
  }
}

void SoftmaxInPlace(float* x, int64_t n, float sink) {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  float mx = kNone;
  for (int64_t i = 0; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  if (mx == kNone) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  // The sink takes part in the maximum too, as the reference does: the
  // shift changes the rounding of every term.
  if (sink != kNone) mx = std::max(mx, sink);
  double sum = 0.0;
#if defined(__AVX2__) && defined(__FMA__)
  // Each term by ExpFlushingTiny, 8 at a time (libm's scalar expf made
  // softmax a third of attention's time), then summed in order, in double. Neither depends on where a term sits
  // in the row: attention's rows of one query differ by leading masked
  // (-inf, so 0) entries between calls, and its bits must not.
  const __m256 shift = _mm256_set1_ps(mx);
  MapInPlace8(x, n, [shift](__m256 v) { return ExpFlushingTiny(_mm256_sub_ps(v, shift)); });
  for (int64_t k = 0; k < n; ++k) sum += x[k];
#else
  for (int64_t k = 0; k < n; ++k) {
    const float e = std::exp(x[k] - mx);
    x[k] = e;
    sum += e;
  }
#endif
  if (sink != kNone) sum += std::exp(sink - mx);
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t k = 0; k < n; ++k) x[k] *= inv;
}

}  // namespace cairn
