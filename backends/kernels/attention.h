// Scaled dot-product attention of a run of queries over a key/value cache,
// with grouped-query heads, a per-query visibility limit (causality), an
// optional sliding window, an optional logit soft cap and optional attention
// sinks. F32 throughout.
#ifndef CAIRN_BACKENDS_KERNELS_ATTENTION_H_
#define CAIRN_BACKENDS_KERNELS_ATTENTION_H_

#include <cstdint>

#include "backends/kernels/thread_pool.h"

namespace cairn {

struct AttentionParams {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;  // n_head must be a multiple; query head h reads kv head h / (n_head / n_head_kv)
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
  float scale = 1.0f;    // applied to q.k before the soft cap
  float softcap = 0.0f;  // > 0: s = softcap * tanh(s / softcap)
  int32_t window = 0;    // > 0: query at p sees keys at positions p' with p - p' < window
  // [n_head] or null: head h's sink logit joins each of its softmax
  // denominators unscaled and without a value row (gpt-oss), so a query
  // can attend to "nothing".
  const float* sinks = nullptr;
};

// Inputs, all row-major with explicit strides (in floats):
//   q   [n_q][n_head * head_dim_k]
//   k   [n_kv][n_head_kv * head_dim_k],  v [n_kv][n_head_kv * head_dim_v]
//   out [n_q][n_head * head_dim_v]   (must not alias q, k or v)
// Query i sees kv rows kv_begin[i] <= j < kv_end[i] (causal in row order;
// kv_begin null means 0), and when a window is set only those with
// q_pos[i] - kv_pos[j] < window. kv_begin lets a caller whose rows are in
// position order skip rows a window hides without scoring them (SWA over a
// long run). With kv_wrap > 0 the rows j are logical: row j is stored at
// j % kv_wrap of k, v and kv_pos, so a ring buffer (an SWA cache) is read in
// place without copying it into position order. A query that sees no row
// gets zeros. Parallel on `pool` over (the query heads of one KV head, block
// of queries) items, which read each key and value row once for all those
// heads; no BLAS. Thread-safe for distinct outputs; only reads its inputs.
//
// Batch invariance: a query's output is a function of its own inputs only,
// bit for bit: its q row, the rows it sees (their values, in logical order)
// and the params give the same output whatever n_q, whatever other queries
// share the call, whatever the pool's thread count, whether the rows are
// read in order or through kv_wrap, and whether rows a window hides are
// skipped through kv_begin or masked. Every score is one fixed-order dot
// (attention_tiles.h), then scale, soft cap and window mask; the softmax runs
// over exactly the rows the query sees, in order; the output accumulates
// them in order. This holds within the one set of tiles a process picks at
// its first call (AVX2+FMA, or portable under CAIRN_ISA=portable or on an
// older CPU); the two sets round differently. So a sequence's prompt
// positions get the same activations whether it arrives in one chunk, in
// several, or batched with other sequences (issue 31).
struct AttentionArgs {
  const float* q = nullptr;
  int64_t q_stride = 0;
  int64_t n_q = 0;
  const int32_t* kv_end = nullptr;    // [n_q]
  const int32_t* kv_begin = nullptr;  // [n_q] or null (every query starts at row 0)
  const int32_t* q_pos = nullptr;     // [n_q], used only with a window
  const float* k = nullptr;
  int64_t k_stride = 0;
  const float* v = nullptr;
  int64_t v_stride = 0;
  const int32_t* kv_pos = nullptr;  // [n_kv], used only with a window
  int64_t n_kv = 0;
  int64_t kv_wrap = 0;  // > 0: logical row j is stored at row j % kv_wrap
  float* out = nullptr;
  int64_t out_stride = 0;
};

void Attention(const AttentionParams& p, const AttentionArgs& a, ThreadPool& pool);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_ATTENTION_H_
