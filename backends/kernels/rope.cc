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

void RopeCacheImrope(const RopeParams& p, const int32_t sections[4], const float pos[4], float* cache) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_dims));
  const int32_t sect_dims = sections[0] + sections[1] + sections[2] + sections[3];
  float theta[4] = {pos[0], pos[1], pos[2], pos[3]};
  for (int32_t i = 0; i < p.n_dims / 2; ++i) {
    const int32_t s = sect_dims > 0 ? i % sect_dims : 0;
    int c = 3;  // e
    if (s % 3 == 1 && s < 3 * sections[1]) {
      c = 1;
    } else if (s % 3 == 2 && s < 3 * sections[2]) {
      c = 2;
    } else if (s % 3 == 0 && s < 3 * sections[0]) {
      c = 0;
    }
    const float ff = p.freq_factors.empty() ? 1.0f : p.freq_factors[i];
    const float t = p.freq_scale * (theta[c] / ff);
    cache[2 * i] = std::cos(t) * p.attn_factor;
    cache[2 * i + 1] = std::sin(t) * p.attn_factor;
    for (float& th : theta) th *= theta_scale;
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
