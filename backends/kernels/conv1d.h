// Causal depthwise 1-D convolution with carried state, as the recurrent
// layers (Mamba, Mamba-2, Gated DeltaNet) apply it before their scan.
#ifndef CAIRN_BACKENDS_KERNELS_CONV1D_H_
#define CAIRN_BACKENDS_KERNELS_CONV1D_H_

#include <cstdint>
#include <vector>

namespace cairn {

enum class Conv1dActivation { kNone, kSilu };

// One sequence's run of tokens through a causal depthwise convolution of
// kernel width d_conv over `n_channels` channels.
//
// For token t and channel c:
//   y[t][c] = act(bias[c] + sum_{k<d_conv} window_t[k][c] * weight[k][c])
// where window_t is the d_conv inputs ending at t, oldest first; inputs before
// the run come from `state`. The sum runs over k in order starting from 0.0f
// and the bias is added last, as the reference does, so that splitting a
// sequence into runs of any length gives bit-identical outputs.
//
// Layouts (all F32, row-major, rows may be strided so that channel slices of
// wider matrices can be passed without copying):
//   x:      [n_tokens] rows of n_channels at x + t * x_stride
//   y:      [n_tokens] rows of n_channels at y + t * y_stride; must not
//           overlap x or state
//   state:  [d_conv - 1] rows of n_channels at state + r * state_stride, the
//           last d_conv - 1 inputs of the sequence, oldest first (zeros for a
//           fresh sequence). Updated in place to the last d_conv - 1 inputs
//           after this run.
//   weight: tap-major [d_conv] rows of n_channels at weight + k * weight_stride
//           (the transpose of GGUF's [d_conv, channels] tensor: see
//           TransposeConvWeight), so the inner loop runs over channels.
//   bias:   n_channels values, or null for none.
// A caller may split the channels between threads by offsetting every
// pointer by the same channel index and passing a smaller n_channels.
// Preconditions (checked by callers, not here): d_conv >= 1, n_tokens >= 0.
struct Conv1dArgs {
  int64_t n_tokens = 0;
  int64_t n_channels = 0;
  int d_conv = 0;
  const float* x = nullptr;
  int64_t x_stride = 0;
  float* y = nullptr;
  int64_t y_stride = 0;
  float* state = nullptr;
  int64_t state_stride = 0;
  const float* weight = nullptr;
  int64_t weight_stride = 0;
  const float* bias = nullptr;
  Conv1dActivation activation = Conv1dActivation::kNone;
};
void CausalConv1d(const Conv1dArgs& args);

// GGUF stores the conv weight as [d_conv, channels] (d_conv innermost, one
// row per channel); returns it tap-major, [d_conv][channels].
std::vector<float> TransposeConvWeight(const float* gguf_weight, int d_conv, int64_t n_channels);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_CONV1D_H_
