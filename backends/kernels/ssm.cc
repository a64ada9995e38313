#include "backends/kernels/ssm.h"

#include <cmath>
#include <vector>

#include "backends/kernels/norm.h"

namespace cairn {

void Mamba2Scan(const Mamba2ScanArgs& a) {
  const int64_t hd = a.head_dim;
  const int64_t ds = a.d_state;
  const int64_t heads_per_group = a.n_head / a.n_group;
  // Per-head scratch: x * dt' and the running output sums.
  std::vector<float> scratch(static_cast<size_t>(2 * hd));
  float* __restrict xdt = scratch.data();
  float* __restrict acc = scratch.data() + hd;

  for (int64_t h = a.head_begin; h < a.head_end; ++h) {
    const int64_t g = h / heads_per_group;
    float* __restrict s_head = a.state + h * ds * hd;
    const float A = a.A[h];
    const float D = a.D != nullptr ? a.D[h] : 0.0f;
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const float* __restrict x = a.x + t * a.x_stride + h * hd;
      const float* __restrict B = a.B + t * a.bc_stride + g * ds;
      const float* __restrict C = a.C + t * a.bc_stride + g * ds;
      const float dt = Softplus(a.dt[t * a.dt_stride + h] + a.dt_bias[h]);
      const float dA = std::exp(dt * A);
      for (int64_t i = 0; i < hd; ++i) {
        xdt[i] = x[i] * dt;
        acc[i] = 0.0f;
      }
      for (int64_t n = 0; n < ds; ++n) {
        const float b = B[n];
        const float c = C[n];
        float* __restrict s = s_head + n * hd;
        for (int64_t i = 0; i < hd; ++i) {
          const float v = s[i] * dA + b * xdt[i];
          s[i] = v;
          acc[i] += v * c;
        }
      }
      float* __restrict y = a.y + t * a.y_stride + h * hd;
      if (a.D != nullptr) {
        for (int64_t i = 0; i < hd; ++i) y[i] = acc[i] + x[i] * D;
      } else {
        for (int64_t i = 0; i < hd; ++i) y[i] = acc[i];
      }
    }
  }
}

void Mamba1Scan(const Mamba1ScanArgs& a) {
  const int64_t c0 = a.channel_begin;
  const int64_t nc = a.channel_end - a.channel_begin;
  if (nc <= 0) return;
  std::vector<float> scratch(static_cast<size_t>(3 * nc));
  float* __restrict dts = scratch.data();
  float* __restrict xdt = scratch.data() + nc;
  float* __restrict acc = scratch.data() + 2 * nc;

  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const float* __restrict x = a.x + t * a.x_stride + c0;
    const float* __restrict dt = a.dt + t * a.dt_stride + c0;
    const float* __restrict B = a.B + t * a.bc_stride;
    const float* __restrict C = a.C + t * a.bc_stride;
    for (int64_t c = 0; c < nc; ++c) {
      dts[c] = Softplus(dt[c]);
      xdt[c] = x[c] * dts[c];
      acc[c] = 0.0f;
    }
    for (int64_t n = 0; n < a.d_state; ++n) {
      const float b = B[n];
      const float cn = C[n];
      float* __restrict s = a.state + n * a.d_inner + c0;
      const float* __restrict A = a.A_t + n * a.d_inner + c0;
      for (int64_t c = 0; c < nc; ++c) {
        const float v = s[c] * std::exp(dts[c] * A[c]) + b * xdt[c];
        s[c] = v;
        acc[c] += v * cn;
      }
    }
    float* __restrict y = a.y + t * a.y_stride + c0;
    if (a.D != nullptr) {
      const float* __restrict D = a.D + c0;
      for (int64_t c = 0; c < nc; ++c) y[c] = acc[c] + x[c] * D[c];
    } else {
      for (int64_t c = 0; c < nc; ++c) y[c] = acc[c];
    }
  }
}

std::vector<float> TransposeMamba1A(const float* gguf_a, int64_t d_inner, int64_t d_state) {
  std::vector<float> out(static_cast<size_t>(d_inner * d_state));
  for (int64_t c = 0; c < d_inner; ++c) {
    for (int64_t n = 0; n < d_state; ++n) out[n * d_inner + c] = gguf_a[c * d_state + n];
  }
  return out;
}

void GroupRmsNorm(const float* x, int64_t n_groups, int64_t group_size, const float* weight,
                  float eps, float* out) {
  for (int64_t g = 0; g < n_groups; ++g) {
    const int64_t o = g * group_size;
    RmsNorm(x + o, weight != nullptr ? weight + o : nullptr, group_size, eps, out + o);
  }
}

}  // namespace cairn
