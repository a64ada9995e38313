// The gated short convolution of LFM2's convolution layers: the mixer that
// replaces attention there, with a conv state but no recurrent state.
//
// Per token x (the normalized layer input, n_embd wide):
//   [B | C | h] = in_proj(x)                     (three n_embd chunks, in that order)
//   u    = B * h                                 (element-wise)
//   v[c] = sum_k u_{t-L+1+k}[c] * w[k][c]        (causal depthwise conv of kernel
//                                                  L = shortconv.l_cache, last tap
//                                                  the current token; no bias, no
//                                                  activation)
//   out  = out_proj(C * v)
// The state is the last L - 1 rows of u (zeros for a fresh sequence), in
// the layout of the conv kernel (recurrent_run.h), so a run split anywhere,
// or resumed from a snapshot, gives bit-identical outputs.
#ifndef CAIRN_BACKENDS_LAYERS_SHORT_CONV_MIXER_H_
#define CAIRN_BACKENDS_LAYERS_SHORT_CONV_MIXER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/kernels/matmul.h"
#include "backends/kernels/thread_pool.h"
#include "backends/layers/model_loading.h"
#include "backends/layers/recurrent_run.h"
#include "backends/layers/work_buffers.h"

namespace cairn {

struct ShortConvGeometry {
  int64_t n_embd = 0;   // {arch}.embedding_length: the conv channels too
  int64_t l_cache = 0;  // {arch}.shortconv.l_cache: the kernel width (>= 2)

  // Floats of state per layer: the last l_cache - 1 conv inputs.
  int64_t conv_state_floats() const { return (l_cache - 1) * n_embd; }
};

// From "<arch>.embedding_length" and "<arch>.shortconv.l_cache":
// INVALID_ARGUMENT naming the key when missing or out of range.
absl::StatusOr<ShortConvGeometry> ReadShortConvGeometry(const ModelLoader& loader);

struct ShortConvWeights {
  WeightMatrix in_proj;            // shortconv.in_proj: n_embd -> 3 n_embd
  WeightMatrix out_proj;           // shortconv.out_proj: n_embd -> n_embd
  std::vector<float> conv_weight;  // tap-major [l_cache][n_embd]

  size_t matrix_bytes() const { return in_proj.bytes() + out_proj.bytes(); }
};

// Loads blk.<layer>.shortconv.{in_proj,conv,out_proj}.weight, checking
// every shape: INVALID_ARGUMENT naming the tensor.
absl::StatusOr<ShortConvWeights> LoadShortConv(const ModelLoader& loader, const ShortConvGeometry& geometry, int layer);

// out[r] = mixer(in[r]) for the n_rows rows of `in` ([n_rows][n_embd]),
// advancing each run's conv state (RecurrentRun::conv_state; `state` is
// unused) over its rows in order and filling its taps' conv states. Runs
// cover disjoint rows and distinct states. out: [n_rows][n_embd], not
// aliasing `in`. Uses the kMixer* slots of `buffers`.
void ShortConvForward(const ShortConvGeometry& geometry, const ShortConvWeights& weights,
                      std::span<const RecurrentRun> runs, const float* in, int64_t n_rows, float* out, ThreadPool& pool,
                      MatMulPrecision precision, WorkBuffers& buffers);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_SHORT_CONV_MIXER_H_
