#include "backends/kernels/activation.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cairn {

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
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
  for (int64_t i = 0; i < n; ++i) {
    const float e = std::exp(x[i] - mx);
    x[i] = e;
    sum += e;
  }
  if (sink != kNone) sum += std::exp(sink - mx);
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace cairn
