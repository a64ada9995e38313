#include "backends/kernels/rope.h"

#include <algorithm>
#include <cmath>

namespace cairn {
namespace {

// The dimension whose wavelength makes n_rot turns over n_ctx_orig positions.
float YarnCorrDim(int32_t n_dims, int32_t n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2 * static_cast<float>(M_PI))) / (2 * std::log(base));
}

// The angle and magnitude of pairs for one position: the linear (and
// per-pair factor) scaling, and YaRN's blend when enabled.
class PairAngles {
 public:
  explicit PairAngles(const RopeParams& p) : p_(p), mscale_(p.attn_factor) {
    if (p.ext_factor != 0.0f) {
      RopeYarnCorrDims(p.n_dims, p.yarn_orig_ctx, p.freq_base, p.beta_fast, p.beta_slow, corr_);
      mscale_ *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
  }
  // cos and sin of pair i whose unscaled angle is theta.
  void Write(int32_t i, float theta, float* cache) const {
    const float ff = p_.freq_factors.empty() ? 1.0f : p_.freq_factors[i];
    const float extrap = theta / ff;
    const float interp = p_.freq_scale * extrap;
    float t = interp;
    if (p_.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i) - corr_[0]) / std::max(0.001f, corr_[1] - corr_[0]);
      const float mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p_.ext_factor;
      t = interp * (1.0f - mix) + extrap * mix;
    }
    cache[2 * i] = std::cos(t) * mscale_;
    cache[2 * i + 1] = std::sin(t) * mscale_;
  }

 private:
  const RopeParams& p_;
  float mscale_;
  float corr_[2] = {0.0f, 0.0f};
};

}  // namespace

void RopeYarnCorrDims(int32_t n_dims, int32_t n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                      float dims[2]) {
  const float start = std::floor(YarnCorrDim(n_dims, n_ctx_orig, beta_fast, freq_base));
  const float end = std::ceil(YarnCorrDim(n_dims, n_ctx_orig, beta_slow, freq_base));
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min(static_cast<float>(n_dims - 1), end);
}

void RopeCache(const RopeParams& p, float pos, float* cache) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_dims));
  const PairAngles angles(p);
  float theta = pos;
  for (int32_t i = 0; i < p.n_dims / 2; ++i) {
    angles.Write(i, theta, cache);
    theta *= theta_scale;
  }
}

void RopeCacheImrope(const RopeParams& p, const int32_t sections[4], const float pos[4], float* cache) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_dims));
  const int32_t sect_dims = sections[0] + sections[1] + sections[2] + sections[3];
  const PairAngles angles(p);
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
    angles.Write(i, theta[c], cache);
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
