// The Mamba-1 and Mamba-2 mixers (the SSM block that replaces attention):
// their geometry from GGUF metadata, their weights, and their forward pass
// over a batch of sequence runs. Shared by the recurrent family and by
// hybrids (granitehybrid's Mamba-2 layers) so that both compute the same
// mathematics on the same state layout.
#ifndef CAIRN_BACKENDS_LAYERS_MAMBA_MIXER_H_
#define CAIRN_BACKENDS_LAYERS_MAMBA_MIXER_H_

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

enum class MambaVersion { kMamba1, kMamba2 };

// Sizes of one mixer, identical for every layer of a model.
struct MambaGeometry {
  MambaVersion version = MambaVersion::kMamba2;
  int64_t n_embd = 0;
  int64_t d_conv = 0;   // {arch}.ssm.conv_kernel
  int64_t d_inner = 0;  // {arch}.ssm.inner_size
  int64_t d_state = 0;  // {arch}.ssm.state_size
  // Mamba-2: heads = {arch}.ssm.time_step_rank, head_dim = d_inner / heads,
  // groups = {arch}.ssm.group_count. Mamba-1: d_inner heads of dim 1, 1 group.
  int64_t n_head = 0;
  int64_t head_dim = 0;
  int64_t n_group = 0;
  int64_t dt_rank = 0;      // Mamba-1 only: {arch}.ssm.time_step_rank
  bool dt_b_c_rms = false;  // Mamba-1 only: RMS-normalize dt, B, C (FalconMamba, Jamba)
  // Mamba-1 only, with dt_b_c_rms: those norms are scaled by weights
  // ssm_{dt,b,c}_norm.weight (Jamba); FalconMamba's have none.
  bool dt_b_c_norm_weights = false;
  float rms_eps = 1e-5f;  // {arch}.attention.layer_norm_rms_epsilon

  // Channels the convolution runs over: x, B and C (Mamba-2) or x (Mamba-1).
  int64_t conv_channels() const { return version == MambaVersion::kMamba2 ? d_inner + 2 * n_group * d_state : d_inner; }
  // Width of the in-projection: z, xBC, dt (Mamba-2) or x, z (Mamba-1).
  int64_t in_proj_size() const {
    return version == MambaVersion::kMamba2 ? 2 * d_inner + 2 * n_group * d_state + n_head : 2 * d_inner;
  }
  // Floats of state per layer: the last d_conv - 1 conv inputs, and the SSM
  // state (d_state x d_inner). Times 4 bytes and the layer count this is the
  // architecture's recurrent-state formula (llama.cpp's n_embd_r + n_embd_s).
  int64_t conv_state_floats() const { return (d_conv - 1) * conv_channels(); }
  int64_t ssm_state_floats() const { return d_state * d_inner; }
  int64_t state_floats() const { return conv_state_floats() + ssm_state_floats(); }
};

// Reads the geometry from the model's "<arch>.ssm.*" keys (mamba, mamba2,
// or a hybrid using one of them). INVALID_ARGUMENT naming the key when a
// value is missing, of the wrong type, out of range or inconsistent (heads
// that do not divide d_inner).
absl::StatusOr<MambaGeometry> ReadMambaGeometry(const ModelLoader& loader, MambaVersion version);

// One layer's weights. Matrices point into the model file; the small vectors
// are converted to F32 (and transposed where the kernels want it) at load.
struct MambaMixerWeights {
  WeightMatrix in_proj;            // ssm_in: n_embd -> in_proj_size
  WeightMatrix x_proj;             // Mamba-1 ssm_x: d_inner -> dt_rank + 2 d_state
  WeightMatrix dt_proj;            // Mamba-1 ssm_dt: dt_rank -> d_inner
  WeightMatrix out_proj;           // ssm_out: d_inner -> n_embd
  std::vector<float> conv_weight;  // tap-major [d_conv][conv_channels]
  std::vector<float> conv_bias;    // [conv_channels]
  std::vector<float> dt_bias;      // [n_head] (Mamba-2) / [d_inner] (Mamba-1)
  std::vector<float> A;            // [n_head] (Mamba-2) / [d_state][d_inner] (Mamba-1)
  std::vector<float> D;            // [n_head] (Mamba-2) / [d_inner] (Mamba-1)
  std::vector<float> norm;         // Mamba-2 grouped norm [d_inner], empty when absent
  // Mamba-1 with dt_b_c_norm_weights: the weights of the dt, B and C norms
  // ([dt_rank], [d_state], [d_state]); empty otherwise.
  std::vector<float> dt_norm, b_norm, c_norm;

  // Bytes of weights read per token.
  size_t matrix_bytes() const;
};

// Loads the mixer of layer `layer` (tensors "blk.<layer>.ssm_*"), checking
// every shape against `geometry`: INVALID_ARGUMENT naming the tensor (and
// both shapes on a mismatch).
absl::StatusOr<MambaMixerWeights> LoadMambaMixer(const ModelLoader& loader, const MambaGeometry& geometry, int layer);

// out[r] = mixer(in[r]) for the n_rows rows of `in` ([n_rows][n_embd], the
// normalized layer input), advancing each run's state over its rows in order.
// Runs must cover disjoint row ranges that together are all n_rows rows, and
// distinct states. Tokens of one run are processed in sequence (the exact
// form); runs and heads/channels are spread over `pool`. out: [n_rows][n_embd],
// not aliasing `in`. Uses the kMixer* slots of `buffers`.
void MambaMixerForward(const MambaGeometry& geometry, const MambaMixerWeights& weights,
                       std::span<const RecurrentRun> runs, const float* in, int64_t n_rows, float* out,
                       ThreadPool& pool, MatMulPrecision precision, WorkBuffers& buffers);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_MAMBA_MIXER_H_
