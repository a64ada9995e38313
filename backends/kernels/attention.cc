#include "backends/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/kernels/activation.h"
#include "backends/kernels/attention_tiles.h"
#include "backends/kernels/cpu_isa.h"

namespace cairn {
namespace {

float Sink(const AttentionParams& p, int32_t h) {
  return p.sinks != nullptr ? p.sinks[h] : -std::numeric_limits<float>::infinity();
}

// Read once: the CPU and the CAIRN_ISA cap do not change while a process
// runs, and every call must take the same tiles for a query's bits not to
// depend on the call.
const AttentionTiles& Tiles() {
  static const AttentionTiles& chosen = Avx2Allowed() ? attention_avx2::kTiles : attention_portable::kTiles;
  return chosen;
}

// Queries per work item: one head over this many queries shares the row
// tables and keeps the rows it reads warm; the scores take
// kQueryBlock x (rows the block sees) floats.
constexpr int64_t kQueryBlock = 32;

// A work item's tables, reused across items of a thread.
struct Scratch {
  std::vector<const float*> q_rows, k_rows, v_rows;
  std::vector<float*> out_rows;
  std::vector<int64_t> begin, end;  // per query, relative to the first row of the block
  std::vector<float> scores;
};

// The rows [lo, hi) of the block of queries [i0, i0 + nq): the union of
// their ranges, empty (lo >= hi) if none sees a row.
void BlockRows(const AttentionArgs& a, int64_t i0, int64_t nq, int64_t* lo, int64_t* hi) {
  *lo = std::numeric_limits<int64_t>::max();
  *hi = 0;
  for (int64_t i = i0; i < i0 + nq; ++i) {
    const int64_t b = a.kv_begin ? a.kv_begin[i] : 0;
    if (a.kv_end[i] <= b) continue;
    *lo = std::min(*lo, b);
    *hi = std::max<int64_t>(*hi, a.kv_end[i]);
  }
}

// Turns query i's scores (rows b .. e - 1 of the block starting at logical
// row lo) into softmax weights: scale, soft cap, window mask, then softmax
// over exactly those rows in order.
void ScoresToWeights(const AttentionParams& p, const AttentionArgs& a, int32_t h, int64_t i, int64_t lo, int64_t b,
                     int64_t e, float* row) {
  for (int64_t jj = b; jj < e; ++jj) {
    float s = row[jj] * p.scale;
    if (p.softcap > 0.0f) s = p.softcap * std::tanh(s / p.softcap);
    if (p.window > 0) {
      const int64_t j = a.kv_wrap > 0 ? (lo + jj) % a.kv_wrap : lo + jj;
      if (a.q_pos[i] - a.kv_pos[j] >= p.window) s = -std::numeric_limits<float>::infinity();
    }
    row[jj] = s;
  }
  SoftmaxInPlace(row + b, e - b, Sink(p, h));
}

// Head h over queries [i0, i0 + nq).
void AttendBlock(const AttentionParams& p, const AttentionArgs& a, int32_t h, int64_t i0, int64_t nq, Scratch& s) {
  const int32_t hk = h / (p.n_head / p.n_head_kv);
  s.q_rows.resize(static_cast<size_t>(nq));
  s.out_rows.resize(static_cast<size_t>(nq));
  for (int64_t i = 0; i < nq; ++i) {
    s.q_rows[i] = a.q + (i0 + i) * a.q_stride + static_cast<int64_t>(h) * p.head_dim_k;
    s.out_rows[i] = a.out + (i0 + i) * a.out_stride + static_cast<int64_t>(h) * p.head_dim_v;
  }
  int64_t lo = 0, hi = 0;
  BlockRows(a, i0, nq, &lo, &hi);
  if (hi <= lo) {
    for (float* o : s.out_rows) std::fill_n(o, p.head_dim_v, 0.0f);
    return;
  }
  const int64_t n = hi - lo;
  s.k_rows.resize(static_cast<size_t>(n));
  s.v_rows.resize(static_cast<size_t>(n));
  for (int64_t jj = 0; jj < n; ++jj) {
    const int64_t j = a.kv_wrap > 0 ? (lo + jj) % a.kv_wrap : lo + jj;
    s.k_rows[jj] = a.k + j * a.k_stride + static_cast<int64_t>(hk) * p.head_dim_k;
    s.v_rows[jj] = a.v + j * a.v_stride + static_cast<int64_t>(hk) * p.head_dim_v;
  }
  s.begin.resize(static_cast<size_t>(nq));
  s.end.resize(static_cast<size_t>(nq));
  for (int64_t i = 0; i < nq; ++i) {
    s.begin[i] = (a.kv_begin ? a.kv_begin[i0 + i] : 0) - lo;
    s.end[i] = std::max(a.kv_end[i0 + i] - lo, s.begin[i]);  // an empty range stays empty
  }
  s.scores.resize(static_cast<size_t>(nq * n));
  const AttentionTiles& tiles = Tiles();
  tiles.dots(s.q_rows.data(), nq, s.k_rows.data(), s.begin.data(), s.end.data(), p.head_dim_k, s.scores.data(), n);
  for (int64_t i = 0; i < nq; ++i) ScoresToWeights(p, a, h, i0 + i, lo, s.begin[i], s.end[i], &s.scores[i * n]);
  tiles.weighted_sums(s.scores.data(), n, nq, s.begin.data(), s.end.data(), s.v_rows.data(), p.head_dim_v,
                      s.out_rows.data());
}

}  // namespace

void Attention(const AttentionParams& p, const AttentionArgs& a, ThreadPool& pool) {
  const int64_t n_blocks = (a.n_q + kQueryBlock - 1) / kQueryBlock;
  // Head-major items: with causal masks late queries cost more than early
  // ones, so contiguous chunks of items stay balanced only when every chunk
  // spans whole heads' query ranges.
  pool.ParallelFor(p.n_head * n_blocks, 1, [&](int64_t begin, int64_t end) {
    thread_local Scratch scratch;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t i0 = (item % n_blocks) * kQueryBlock;
      AttendBlock(p, a, static_cast<int32_t>(item / n_blocks), i0, std::min(kQueryBlock, a.n_q - i0), scratch);
    }
  });
}

}  // namespace cairn
