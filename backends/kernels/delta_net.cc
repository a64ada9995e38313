#include "backends/kernels/delta_net.h"

#include <algorithm>
#include <cmath>

#include "backends/kernels/vec.h"

namespace cairn {

void L2Normalize(const float* x, int64_t n, float eps, float* y) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::max(std::sqrt(static_cast<float>(sum)), eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
}

void GatedDeltaRule(const GatedDeltaRuleArgs& a) {
  for (int64_t h = a.head_begin; h < a.head_end; ++h) {
    // Value head h reads key head h mod n_head_k (the reference tiles the
    // key heads, it does not interleave them).
    const int64_t hk = h % a.n_head_k;
    float* S = a.state + h * a.d_v * a.d_k;
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      const float* q = a.q + t * a.qk_stride + hk * a.d_k;
      const float* k = a.k + t * a.qk_stride + hk * a.d_k;
      const float* v = a.v + t * a.v_stride + h * a.d_v;
      const float decay = std::exp(a.g[t * a.gb_stride + h]);
      const float beta = a.beta[t * a.gb_stride + h];
      float* o = a.out + t * a.out_stride + h * a.d_v;
      // Each state row j (one value component) evolves independently of the
      // others within a token, so the four steps run row by row while the
      // row is in L1.
      for (int64_t j = 0; j < a.d_v; ++j) {
        float* row = S + j * a.d_k;
        for (int64_t i = 0; i < a.d_k; ++i) row[i] *= decay;
        const float delta = (v[j] - DotF32(row, k, a.d_k)) * beta;
        AxpyF32(delta, k, row, a.d_k);
        o[j] = DotF32(row, q, a.d_k) * a.scale;
      }
    }
  }
}

}  // namespace cairn
