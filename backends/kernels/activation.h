// Elementwise activations and softmax. Pure functions, thread-safe.
#ifndef CAIRN_BACKENDS_KERNELS_ACTIVATION_H_
#define CAIRN_BACKENDS_KERNELS_ACTIVATION_H_

#include <cstdint>

namespace cairn {

// out[i] = silu(gate[i]) * up[i]; out may alias gate or up.
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);

// out[i] = gelu(gate[i]) * up[i] (tanh approximation); out may alias.
void GeGlu(const float* gate, const float* up, int64_t n, float* out);

// out[i] = max(x[i], 0)^2 (squared ReLU); out may alias x.
void ReluSquared(const float* x, int64_t n, float* out);

// In place: x = softmax(x) over n values; -inf entries get 0. Sums in double.
// If every entry is -inf the row becomes all zeros.
void SoftmaxInPlace(float* x, int64_t n);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_ACTIVATION_H_
