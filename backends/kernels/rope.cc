#include "backends/kernels/rope.h"

#include <cmath>

namespace cairn {

void RopeCache(const RopeParams& p, float pos, float* cache) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_dims));
  float theta = pos;
  for (int32_t i = 0; i < p.n_dims / 2; ++i) {
    const float ff = p.freq_factors.empty() ? 1.0f : p.freq_factors[i];
    const float t = p.freq_scale * (theta / ff);
    cache[2 * i] = std::cos(t) * p.attn_factor;
    cache[2 * i + 1] = std::sin(t) * p.attn_factor;
    theta *= theta_scale;
  }
}

void RopeApply(const RopeParams& p, const float* cache, float* x, int32_t n_heads, int32_t head_dim) {
  const int32_t half = p.n_dims / 2;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    if (p.type == RopeType::kNormal) {
      for (int32_t i = 0; i < half; ++i) {
        const float c = cache[2 * i], s = cache[2 * i + 1];
        const float a = v[2 * i], b = v[2 * i + 1];
        v[2 * i] = a * c - b * s;
        v[2 * i + 1] = a * s + b * c;
      }
    } else {
      for (int32_t i = 0; i < half; ++i) {
        const float c = cache[2 * i], s = cache[2 * i + 1];
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = a * s + b * c;
      }
    }
  }
}

}  // namespace cairn
