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

// Query rows (queries x heads) per work item: they share the row tables and
// the copies of the rows they read; the scores take kQueryRows x (rows the
// item sees) floats (L2-sized at a few thousand rows). A multiple of the
// AVX2 tiles' 3 queries.
constexpr int64_t kQueryRows = 48;

// A work item's tables, reused across items of a thread.
struct Scratch {
  std::vector<const float*> q_rows, k_rows, v_rows;
  std::vector<float*> out_rows, packed_out_rows;
  std::vector<int64_t> begin, end;  // per query row, relative to the first row of the item
  std::vector<float> scores;
  // Contiguous copies of the item's rows (kPackFromQueries).
  std::vector<float> q_packed, v_packed, out_packed;
};

// Query rows per item from which its query, value and output rows are
// copied into contiguous scratch before the tiles read them. In q, v and
// out, rows are a whole token's width apart (4 KiB and more), so the rows a
// tile reuses map to the same few L1 sets and evict one another; copied,
// they sit in consecutive sets. Key rows are left in place: the scores read
// each group of them briefly, and copying them cost more than it saved
// (bench/attention). Below this many query rows (decode) each row is read
// about once and a copy would only add a pass. Copying changes no value, so
// no bit of the result.
constexpr int64_t kPackFromQueries = 8;

// Copies the n rows of `dim` floats that rows[] points at into buf and
// points rows[] at the copies.
template <typename T>
void Packed(T* rows, int64_t n, int32_t dim, std::vector<float>& buf) {
  buf.resize(static_cast<size_t>(n * dim));
  for (int64_t i = 0; i < n; ++i) {
    std::copy_n(rows[i], dim, buf.data() + i * dim);
    rows[i] = buf.data() + i * dim;
  }
}

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
// over exactly those rows in order. One loop per step, so that the common
// case (scale only) is a loop the compiler vectorizes; each score still
// takes the same operations in the same order.
void ScoresToWeights(const AttentionParams& p, const AttentionArgs& a, int32_t h, int64_t i, int64_t lo, int64_t b,
                     int64_t e, float* row) {
  for (int64_t jj = b; jj < e; ++jj) row[jj] *= p.scale;
  if (p.softcap > 0.0f) {
    for (int64_t jj = b; jj < e; ++jj) row[jj] = p.softcap * std::tanh(row[jj] / p.softcap);
  }
  if (p.window > 0) {
    for (int64_t jj = b; jj < e; ++jj) {
      const int64_t j = a.kv_wrap > 0 ? (lo + jj) % a.kv_wrap : lo + jj;
      if (a.q_pos[i] - a.kv_pos[j] >= p.window) row[jj] = -std::numeric_limits<float>::infinity();
    }
  }
  SoftmaxInPlace(row + b, e - b, Sink(p, h));
}

// A work item: query heads [h0, h0 + heads), which share one KV head, over
// queries [i0, i0 + nq). Its query rows are taken query by query, head by
// head (row t = i * heads + g), so the tiles score and sum every key and
// value row the item reads for all its heads while it is in cache, and
// decode reads each row from memory once per KV head, not once per head.
struct Item {
  int32_t h0 = 0, heads = 1;
  int64_t i0 = 0, nq = 0;
};

// The item's query and output rows and their row ranges, relative to lo.
void ItemQueries(const AttentionParams& p, const AttentionArgs& a, const Item& it, int64_t lo, Scratch& s) {
  const int64_t nt = it.nq * it.heads;
  s.q_rows.resize(static_cast<size_t>(nt));
  s.out_rows.resize(static_cast<size_t>(nt));
  s.begin.resize(static_cast<size_t>(nt));
  s.end.resize(static_cast<size_t>(nt));
  for (int64_t i = 0; i < it.nq; ++i) {
    const int64_t b = (a.kv_begin ? a.kv_begin[it.i0 + i] : 0) - lo;
    const int64_t e = std::max(a.kv_end[it.i0 + i] - lo, b);  // an empty range stays empty
    for (int32_t g = 0; g < it.heads; ++g) {
      const int64_t t = i * it.heads + g, h = it.h0 + g;
      s.q_rows[t] = a.q + (it.i0 + i) * a.q_stride + h * p.head_dim_k;
      s.out_rows[t] = a.out + (it.i0 + i) * a.out_stride + h * p.head_dim_v;
      s.begin[t] = b;
      s.end[t] = e;
    }
  }
}

void AttendItem(const AttentionParams& p, const AttentionArgs& a, const Item& it, Scratch& s) {
  const int32_t hk = it.h0 / (p.n_head / p.n_head_kv);
  const int64_t nt = it.nq * it.heads;
  int64_t lo = 0, hi = 0;
  BlockRows(a, it.i0, it.nq, &lo, &hi);
  ItemQueries(p, a, it, hi <= lo ? 0 : lo, s);
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
  // An odd number of 64-byte lines between two queries' scores: a multiple
  // of 4 KiB would put every query's score j in the same L1 set.
  const int64_t stride = (n + 15) / 16 * 16 | 16;
  s.scores.resize(static_cast<size_t>(nt * stride));
  const bool pack = nt >= kPackFromQueries;
  if (pack) {
    Packed(s.q_rows.data(), nt, p.head_dim_k, s.q_packed);
    Packed(s.v_rows.data(), n, p.head_dim_v, s.v_packed);
    s.out_packed.resize(static_cast<size_t>(nt * p.head_dim_v));
    s.packed_out_rows.resize(static_cast<size_t>(nt));
    for (int64_t t = 0; t < nt; ++t) s.packed_out_rows[t] = s.out_packed.data() + t * p.head_dim_v;
  }
  const AttentionTiles& tiles = Tiles();
  tiles.dots(s.q_rows.data(), nt, s.k_rows.data(), s.begin.data(), s.end.data(), p.head_dim_k, s.scores.data(), stride);
  for (int64_t t = 0; t < nt; ++t) {
    ScoresToWeights(p, a, it.h0 + static_cast<int32_t>(t % it.heads), it.i0 + t / it.heads, lo, s.begin[t], s.end[t],
                    &s.scores[t * stride]);
  }
  tiles.weighted_sums(s.scores.data(), stride, nt, s.begin.data(), s.end.data(), s.v_rows.data(), p.head_dim_v,
                      pack ? s.packed_out_rows.data() : s.out_rows.data());
  if (pack) {
    for (int64_t t = 0; t < nt; ++t) std::copy_n(s.packed_out_rows[t], p.head_dim_v, s.out_rows[t]);
  }
}

}  // namespace

void Attention(const AttentionParams& p, const AttentionArgs& a, ThreadPool& pool) {
  const int32_t group = p.n_head / p.n_head_kv;
  // Heads sharing a KV head go in one item unless that leaves a thread idle.
  int32_t heads = group;
  int64_t block = std::max<int64_t>(1, kQueryRows / heads);
  int64_t n_blocks = (a.n_q + block - 1) / block;
  if (heads > 1 && (p.n_head / heads) * n_blocks < pool.size()) {
    heads = 1;
    block = kQueryRows;
    n_blocks = (a.n_q + block - 1) / block;
  }
  // Head-major items: with causal masks late queries cost more than early
  // ones, so contiguous chunks of items stay balanced only when every chunk
  // spans whole heads' query ranges.
  pool.ParallelFor(p.n_head / heads * n_blocks, 1, [&](int64_t begin, int64_t end) {
    thread_local Scratch scratch;
    for (int64_t item = begin; item < end; ++item) {
      Item it;
      it.h0 = static_cast<int32_t>(item / n_blocks) * heads;
      it.heads = heads;
      it.i0 = (item % n_blocks) * block;
      it.nq = std::min(block, a.n_q - it.i0);
      AttendItem(p, a, it, scratch);
    }
  });
}

}  // namespace cairn
