#include "backends/kernels/conv1d.h"

#include <cstring>

#include "backends/kernels/activation.h"

namespace cairn {

void CausalConv1d(const Conv1dArgs& a) {
  const int64_t nc = a.n_channels;
  const int hist = a.d_conv - 1;  // rows of carried state
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    float* __restrict y = a.y + t * a.y_stride;
    for (int64_t c = 0; c < nc; ++c) y[c] = 0.0f;
    // Tap k reads input row t + k - hist; negative rows live in the state.
    for (int k = 0; k < a.d_conv; ++k) {
      const int64_t j = t + k - hist;
      const float* __restrict src = j < 0 ? a.state + (hist + j) * a.state_stride : a.x + j * a.x_stride;
      const float* __restrict w = a.weight + k * a.weight_stride;
      for (int64_t c = 0; c < nc; ++c) y[c] += src[c] * w[c];
    }
    if (a.bias != nullptr) {
      for (int64_t c = 0; c < nc; ++c) y[c] += a.bias[c];
    }
    if (a.activation == Conv1dActivation::kSilu) {
      SiluInPlace(y, nc);
    }
  }

  // The new state is the last `hist` rows of [state; x].
  const size_t row_bytes = static_cast<size_t>(nc) * sizeof(float);
  const int64_t n = a.n_tokens;
  if (n >= hist) {
    for (int r = 0; r < hist; ++r) {
      std::memcpy(a.state + r * a.state_stride, a.x + (n - hist + r) * a.x_stride, row_bytes);
    }
  } else {
    // Ascending order is safe: row r reads row r + n > r, not yet overwritten.
    for (int64_t r = 0; r < hist - n; ++r) {
      std::memcpy(a.state + r * a.state_stride, a.state + (r + n) * a.state_stride, row_bytes);
    }
    for (int64_t j = 0; j < n; ++j) {
      std::memcpy(a.state + (hist - n + j) * a.state_stride, a.x + j * a.x_stride, row_bytes);
    }
  }
}

std::vector<float> TransposeConvWeight(const float* gguf_weight, int d_conv, int64_t n_channels) {
  std::vector<float> out(static_cast<size_t>(d_conv) * n_channels);
  for (int64_t c = 0; c < n_channels; ++c) {
    for (int k = 0; k < d_conv; ++k) out[k * n_channels + c] = gguf_weight[c * d_conv + k];
  }
  return out;
}

}  // namespace cairn
