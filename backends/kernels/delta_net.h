// The gated delta rule of Gated DeltaNet layers (Qwen3.5 / Qwen3-Next linear
// attention) in its exact sequential form, and the L2 normalization applied
// to its queries and keys.
//
// Sequential on purpose: every token updates the state once, in order, so a
// sequence split into runs of any length (a prompt in one batch, token by
// token, or continued after a restored snapshot) produces bit-identical
// states and outputs. Single-threaded over the slice of heads it is given;
// callers split value heads between threads.
#ifndef CAIRN_BACKENDS_KERNELS_DELTA_NET_H_
#define CAIRN_BACKENDS_KERNELS_DELTA_NET_H_

#include <cstdint>

namespace cairn {

// y = x / max(||x||_2, eps) over n values (sum of squares in double, as the
// reference does). y may alias x.
void L2Normalize(const float* x, int64_t n, float eps, float* y);

// One sequence's run through the gated delta rule, for value heads
// [head_begin, head_end). Value head h reads key/query head h % n_head_k
// (tiled, Qwen3.5), or h / (n_head_v / n_head_k) with key_head_blocks
// (repeated in place, Qwen3-Next).
// Per token t and value head h, with S the d_v x d_k state of head h,
// k = k[t][h % n_head_k], q likewise, v = v[t][h], decay = exp(g[t][h]):
//   S     = S * decay
//   delta = beta[t][h] * (v - S k)          (d_v values)
//   S     = S + delta k^T
//   out[t][h] = scale * S q
// Dot products run in F32 in index order within each state row.
//
// Layouts (F32; rows strided so that column slices of a wider projection can
// be passed without copying):
//   q, k:  row t at q + t * qk_stride / k + t * qk_stride, n_head_k * d_k
//          values (head-major), already L2-normalized by the caller
//   v:     row t at v + t * v_stride, n_head_v * d_v values
//   g:     row t at g + t * gb_stride, n_head_v log-decays (<= 0 normally)
//   beta:  row t at beta + t * gb_stride, n_head_v values in (0, 1)
//   state: [n_head_v][d_v][d_k] (key index innermost: S k and S q are
//          contiguous dot products, the update a contiguous axpy); updated in
//          place. This is the snapshot format of the hybrid memory.
//   out:   row t at out + t * out_stride, n_head_v * d_v values; must not
//          overlap the inputs or the state.
// Preconditions (checked by callers): n_head_v % n_head_k == 0, sizes > 0.
struct GatedDeltaRuleArgs {
  int64_t n_tokens = 0;
  int64_t n_head_k = 0;
  int64_t n_head_v = 0;
  int64_t d_k = 0;
  int64_t d_v = 0;
  int64_t head_begin = 0;
  int64_t head_end = 0;
  bool key_head_blocks = false;
  const float* q = nullptr;
  const float* k = nullptr;
  int64_t qk_stride = 0;
  const float* v = nullptr;
  int64_t v_stride = 0;
  const float* g = nullptr;
  const float* beta = nullptr;
  int64_t gb_stride = 0;
  float scale = 1.0f;
  float* state = nullptr;
  float* out = nullptr;
  int64_t out_stride = 0;
};
void GatedDeltaRule(const GatedDeltaRuleArgs& args);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_DELTA_NET_H_
