#include "backends/kernels/attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "backends/kernels/activation.h"
#include "backends/kernels/vec.h"

namespace cairn {
namespace {

float Sink(const AttentionParams& p, int32_t h) {
  return p.sinks != nullptr ? p.sinks[h] : -std::numeric_limits<float>::infinity();
}

// Runs of at least this many queries (prompts) take the GEMM path.
constexpr int64_t kGemmMinQueries = 8;
// Queries per block on the GEMM path: the block's scores are
// kQueryBlock x (kv rows it sees), and later blocks of a causal run see more.
constexpr int64_t kQueryBlock = 128;

// Prompt path: per (head, query block), S = scale * Q K^T and O = P V with
// single-threaded cblas_sgemm (the pool parallelizes over heads and blocks),
// masking in between. Rows are contiguous (no kv_wrap).
void AttentionGemm(const AttentionParams& p, const AttentionArgs& a, ThreadPool& pool) {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });  // as MatMul: the pool parallelizes
  const int32_t group = p.n_head / p.n_head_kv;
  const int64_t n_blocks = (a.n_q + kQueryBlock - 1) / kQueryBlock;
  // Head-major items keep the causal cost balanced across chunks.
  pool.ParallelFor(p.n_head * n_blocks, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> scores;
    for (int64_t item = begin; item < end; ++item) {
      const int32_t h = static_cast<int32_t>(item / n_blocks);
      const int32_t hk = h / group;
      const int64_t i0 = (item % n_blocks) * kQueryBlock;
      const int64_t nq = std::min(kQueryBlock, a.n_q - i0);
      float* o = a.out + i0 * a.out_stride + static_cast<int64_t>(h) * p.head_dim_v;
      int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
      for (int64_t i = i0; i < i0 + nq; ++i) {
        const int64_t b = a.kv_begin ? a.kv_begin[i] : 0;
        if (a.kv_end[i] > b) {
          lo = std::min(lo, b);
          hi = std::max<int64_t>(hi, a.kv_end[i]);
        }
      }
      if (hi <= lo) {  // no query of the block sees a row
        for (int64_t i = 0; i < nq; ++i) std::fill_n(o + i * a.out_stride, p.head_dim_v, 0.0f);
        continue;
      }
      const int64_t n = hi - lo;
      scores.resize(static_cast<size_t>(nq * n));
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(nq), static_cast<int>(n), p.head_dim_k,
                  p.scale, a.q + i0 * a.q_stride + static_cast<int64_t>(h) * p.head_dim_k, static_cast<int>(a.q_stride),
                  a.k + lo * a.k_stride + static_cast<int64_t>(hk) * p.head_dim_k, static_cast<int>(a.k_stride), 0.0f,
                  scores.data(), static_cast<int>(n));
      for (int64_t i = 0; i < nq; ++i) {
        float* row = scores.data() + i * n;
        const int64_t b = (a.kv_begin ? a.kv_begin[i0 + i] : 0) - lo;
        const int64_t e = a.kv_end[i0 + i] - lo;
        for (int64_t j = 0; j < n; ++j) {
          if (j < b || j >= e) {
            row[j] = -std::numeric_limits<float>::infinity();
            continue;
          }
          if (p.softcap > 0.0f) row[j] = p.softcap * std::tanh(row[j] / p.softcap);
          if (p.window > 0 && a.q_pos[i0 + i] - a.kv_pos[lo + j] >= p.window) {
            row[j] = -std::numeric_limits<float>::infinity();
          }
        }
        SoftmaxInPlace(row, n, Sink(p, h));
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(nq), p.head_dim_v, static_cast<int>(n),
                  1.0f, scores.data(), static_cast<int>(n),
                  a.v + lo * a.v_stride + static_cast<int64_t>(hk) * p.head_dim_v, static_cast<int>(a.v_stride), 0.0f,
                  o, static_cast<int>(a.out_stride));
    }
  });
}

}  // namespace

void Attention(const AttentionParams& p, const AttentionArgs& a, ThreadPool& pool) {
  if (a.n_q >= kGemmMinQueries && a.kv_wrap == 0) {
    AttentionGemm(p, a, pool);
    return;
  }
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
      SoftmaxInPlace(scores.data(), n, Sink(p, h));
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
