// The attention block: projections, optional biases and per-head q/k norms,
// rotary positions, the K/V rows written into the sequences' memories, scaled
// dot-product attention (causal, optionally windowed over a ring, soft-capped,
// with attention sinks, gated), and the output projection.
//
// Contract of AttentionForward:
// - Input: the normalized stream `xn` ([pass.n_all_rows()][n_embd]); called
//   before KeepWantedRows. Output: `out` [rows][n_embd], where rows are all
//   the pass's rows (QueryRows::kAll) or only its wanted rows, in order
//   (kWanted: the last layer of a model whose remaining work needs only the
//   rows whose logits are wanted; their K/V rows are still stored for all).
// - The K/V rows of every row are stored in attention slot `slot` of its
//   segment's memory: at its stored row for a full cache, at its position
//   in a ring (a sliding-window layer, which needs block.window > 0).
// - Query at row i sees the keys of its own sequence up to its own row
//   (causal in row order, embedding chunks included), and with a window
//   only positions p' with p - p' < window.
// - Deterministic: the same rows give the same bits whatever the other
//   sequences of the batch.
#ifndef CAIRN_BACKENDS_LAYERS_ATTENTION_H_
#define CAIRN_BACKENDS_LAYERS_ATTENTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/kernels/matmul.h"
#include "backends/layers/forward_pass.h"
#include "backends/layers/model_loading.h"

namespace cairn {

struct AttentionBlock {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;  // divides n_head
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
  float scale = 1.0f;    // on q.k
  float softcap = 0.0f;  // > 0: scores soft-capped (gemma2)
  int32_t window = 0;    // > 0: a sliding-window layer over a ring slot
  // attn_q rows are [query | gate] per head, and the output is multiplied
  // by sigmoid(gate) before the output projection (qwen35, qwen3next).
  bool gated = false;
  const PositionEncoding* rope = nullptr;  // null: no positional encoding
  float norm_eps = 1e-6f;                  // of the per-head q/k norms

  WeightMatrix wq, wk, wv, wo;
  std::vector<float> bq, bk, bv, bo;  // empty: no bias
  std::vector<float> q_norm, k_norm;  // empty: no per-head norm
  std::vector<float> sinks;           // [n_head] sink logits (gpt-oss), empty: none

  int64_t q_dim() const { return static_cast<int64_t>(n_head) * head_dim_k; }
  int64_t k_dim() const { return static_cast<int64_t>(n_head_kv) * head_dim_k; }
  int64_t v_dim() const { return static_cast<int64_t>(n_head_kv) * head_dim_v; }
  int64_t o_dim() const { return static_cast<int64_t>(n_head) * head_dim_v; }
  size_t matrix_bytes() const { return wq.bytes() + wk.bytes() + wv.bytes() + wo.bytes(); }
};

// The sizes of a decoder's attention layer `layer`: its heads and K/V heads
// (hp.n_heads, hp.n_head_kv, checked by CheckHeadCounts) and hp's head dims,
// q.k scaled by `scale` when it is not 0 (the file's attention.scale) else
// by 1/sqrt(head_dim_k), q/k norms with hp.eps.
struct DecoderHParams;
AttentionBlock DecoderAttention(const DecoderHParams& hp, int32_t layer, double scale);

// Which of blk.<layer>.attn_* an architecture has besides the projections.
enum class Presence { kAbsent, kOptional, kRequired };
struct AttentionTensors {
  Presence qkv_bias = Presence::kOptional;  // attn_{q,k,v}.bias
  Presence out_bias = Presence::kOptional;  // attn_output.bias
  Presence qk_norm = Presence::kAbsent;     // attn_{q,k}_norm.weight [head_dim_k]
  Presence sinks = Presence::kAbsent;       // attn_sinks.weight [n_head]
};

// Loads blk.<layer>.attn_{q,k,v,output}.weight (and what `tensors` asks for)
// into `block`, whose sizes (heads, dims, gated) are set already; errors as
// ModelLoader's, naming the tensor.
absl::Status LoadAttention(const ModelLoader& loader, int layer, int64_t n_embd, const AttentionTensors& tensors,
                           AttentionBlock& block);

enum class QueryRows { kAll, kWanted };

void AttentionForward(const AttentionBlock& block, ForwardPass& pass, int32_t slot, const float* xn, float* out,
                      QueryRows rows = QueryRows::kAll);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_ATTENTION_H_
