#include "backends/kernels/attention.h"

#include <cmath>
#include <limits>
#include <vector>

#include "backends/kernels/activation.h"
#include "backends/kernels/vec.h"

namespace cairn {

void Attention(const AttentionParams& p, const AttentionArgs& a, ThreadPool& pool) {
  const int32_t group = p.n_head / p.n_head_kv;
  const int64_t items = a.n_q * p.n_head;
  // Items are head-major: with causal masks late queries cost more than
  // early ones, so contiguous chunks of (head, query) pairs stay balanced
  // only when every chunk spans whole heads' query ranges.
  pool.ParallelFor(items, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores;
    for (int64_t item = begin; item < end; ++item) {
      const int32_t h = static_cast<int32_t>(item / a.n_q);
      const int64_t i = item % a.n_q;
      const int32_t hk = h / group;
      const float* qh = a.q + i * a.q_stride + static_cast<int64_t>(h) * p.head_dim_k;
      float* o = a.out + i * a.out_stride + static_cast<int64_t>(h) * p.head_dim_v;
      const int64_t b = a.kv_begin ? a.kv_begin[i] : 0;
      const int64_t n = a.kv_end[i] > b ? a.kv_end[i] - b : 0;  // rows b .. b + n - 1
      scores.resize(static_cast<size_t>(n > 0 ? n : 1));
      for (int64_t jj = 0; jj < n; ++jj) {
        const int64_t j = a.kv_wrap > 0 ? (b + jj) % a.kv_wrap : b + jj;
        float s = DotF32(qh, a.k + j * a.k_stride + static_cast<int64_t>(hk) * p.head_dim_k, p.head_dim_k) * p.scale;
        if (p.softcap > 0.0f) s = p.softcap * std::tanh(s / p.softcap);
        if (p.window > 0 && a.q_pos[i] - a.kv_pos[j] >= p.window) s = -std::numeric_limits<float>::infinity();
        scores[jj] = s;
      }
      SoftmaxInPlace(scores.data(), n);
      for (int32_t d = 0; d < p.head_dim_v; ++d) o[d] = 0.0f;
      for (int64_t jj = 0; jj < n; ++jj) {
        if (scores[jj] == 0.0f) continue;
        const int64_t j = a.kv_wrap > 0 ? (b + jj) % a.kv_wrap : b + jj;
        AxpyF32(scores[jj], a.v + j * a.v_stride + static_cast<int64_t>(hk) * p.head_dim_v, o, p.head_dim_v);
      }
    }
  });
}

}  // namespace cairn
