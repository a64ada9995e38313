// The Gated DeltaNet mixer of the linear-attention layers of qwen35 and
// qwen3next: geometry from GGUF metadata, weights, and the forward pass over
// a batch of sequence runs.
//
// Per token: a fused QKV projection goes through a causal depthwise conv
// (silu, carried state); q and k are L2-normalized per head; beta =
// sigmoid(W_beta x), log-decay g = softplus(W_alpha x + dt_bias) * ssm_a;
// the gated delta rule (kernels/delta_net.h) updates a d_v x d_k state per
// value head; its output is RMS-normalized per head, gated by
// silu(z = W_gate x) and projected out. The two variants differ in where
// beta and alpha come from and which key head a value head reads
// (DeltaNetVariant).
#ifndef CAIRN_BACKENDS_LAYERS_DELTA_NET_MIXER_H_
#define CAIRN_BACKENDS_LAYERS_DELTA_NET_MIXER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/kernels/matmul.h"
#include "backends/kernels/thread_pool.h"
#include "backends/layers/model_loading.h"
#include "backends/layers/recurrent_run.h"
#include "backends/layers/work_buffers.h"
#include "backends/model/gguf.h"

namespace cairn {

enum class DeltaNetVariant {
  // qwen35: ssm_beta and ssm_alpha; value head h reads key head h mod H_k.
  kQwen35,
  // qwen3next: one ssm_ba whose rows are, per key head g, [beta | alpha] of
  // its value heads g*r .. g*r + r - 1 (r = H_v / H_k); value head h reads
  // key head h / r.
  kQwen3Next,
};

struct DeltaNetGeometry {
  DeltaNetVariant variant = DeltaNetVariant::kQwen35;
  int64_t n_embd = 0;
  int64_t d_conv = 0;    // {arch}.ssm.conv_kernel
  int64_t n_head_k = 0;  // {arch}.ssm.group_count
  int64_t n_head_v = 0;  // {arch}.ssm.time_step_rank
  int64_t d_k = 0;       // {arch}.ssm.state_size
  int64_t d_v = 0;       // {arch}.ssm.inner_size / n_head_v

  int64_t key_dim() const { return n_head_k * d_k; }
  int64_t value_dim() const { return n_head_v * d_v; }
  // Channels of the fused QKV projection and of the convolution: q | k | v.
  int64_t conv_channels() const { return 2 * key_dim() + value_dim(); }
  // Floats of state per layer: the last d_conv - 1 conv inputs, and one
  // d_v x d_k matrix per value head.
  int64_t conv_state_floats() const { return (d_conv - 1) * conv_channels(); }
  int64_t state_floats() const { return n_head_v * d_v * d_k; }
};

// From the model's "<arch>.ssm.*" keys. INVALID_ARGUMENT naming the key for
// missing, out-of-range or inconsistent values (value heads not a multiple
// of key heads, inner size not divisible).
absl::StatusOr<DeltaNetGeometry> ReadDeltaNetGeometry(const ModelLoader& loader,
                                                      DeltaNetVariant variant = DeltaNetVariant::kQwen35);

struct DeltaNetWeights {
  WeightMatrix qkv;                // attn_qkv: n_embd -> conv_channels
  WeightMatrix z;                  // attn_gate: n_embd -> value_dim
  WeightMatrix beta;               // kQwen35 ssm_beta: n_embd -> n_head_v
  WeightMatrix alpha;              // kQwen35 ssm_alpha: n_embd -> n_head_v
  WeightMatrix ba;                 // kQwen3Next ssm_ba: n_embd -> 2 n_head_v
  WeightMatrix out;                // ssm_out: value_dim -> n_embd
  std::vector<float> conv_weight;  // tap-major [d_conv][conv_channels]
  std::vector<float> dt_bias;      // [n_head_v]
  std::vector<float> a;            // [n_head_v], negative (-exp(A_log))
  std::vector<float> norm;         // [d_v]

  size_t matrix_bytes() const;
};

// Loads "blk.<layer>.*", checking every shape: INVALID_ARGUMENT naming the
// tensor (and both shapes on a mismatch); UNIMPLEMENTED for a qwen3next
// layer in the older layout (one ssm_in for q, k, v and z).
absl::StatusOr<DeltaNetWeights> LoadDeltaNet(const ModelLoader& loader, const DeltaNetGeometry& geometry, int layer);

// out[r] = mixer(in[r]) for n_rows rows of `in` ([n_rows][n_embd], the
// normalized layer input). Runs cover disjoint rows and distinct states;
// each run's tokens are processed in order (the exact sequential form), runs
// and heads spread over `pool`. `eps` is the model's RMS epsilon (also the L2
// norm's floor). out: [n_rows][n_embd], not aliasing `in`. Uses the
// mixer slots of `buffers` (`in` and `out` must not be in them).
void DeltaNetForward(const DeltaNetGeometry& geometry, const DeltaNetWeights& weights, float eps,
                     std::span<const RecurrentRun> runs, const float* in, int64_t n_rows, float* out, ThreadPool& pool,
                     MatMulPrecision precision, WorkBuffers& buffers);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_DELTA_NET_MIXER_H_
