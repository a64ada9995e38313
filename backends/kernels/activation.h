// Elementwise activations and softmax. Pure functions, thread-safe.
#ifndef CAIRN_BACKENDS_KERNELS_ACTIVATION_H_
#define CAIRN_BACKENDS_KERNELS_ACTIVATION_H_

#include <cstdint>
#include <limits>

namespace cairn {

// x[i] = silu(x[i]) = x[i] / (1 + e^-x[i]). With AVX2 builds e^x is a
// vector approximation within 2 ulp of libm's (results flushed below e^-87,
// where 1 + e^x rounds to 1 either way); an element's result does not depend
// on its position or on n.
void SiluInPlace(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i] (silu as SiluInPlace); out may alias gate
// or up.
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);

// out[i] = gelu(gate[i]) * up[i] (tanh approximation); out may alias.
void GeGlu(const float* gate, const float* up, int64_t n, float* out);

// SwiGLU-OAI (gpt-oss): with g = min(gate[i], limit) and
// u = clamp(up[i], -limit, limit), out[i] = g * sigmoid(alpha * g) * (u + 1);
// out may alias.
void SwiGluOai(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out);

// out[i] = max(x[i], 0)^2 (squared ReLU); out may alias x.
void ReluSquared(const float* x, int64_t n, float* out);

// In place: x = softmax(x) over n values; -inf entries get 0. Sums in double,
// in order. With AVX2 builds the exponentials are SiluInPlace's (2 ulp;
// below e^-87 they are 0); a term does not depend on its place in the row.
// If every entry is -inf the row becomes all zeros. A finite `sink` is one
// more logit in the denominator that takes no output (an attention sink):
// x[i] = exp(x[i]) / (sum_j exp(x[j]) + exp(sink)); -inf means none.
void SoftmaxInPlace(float* x, int64_t n, float sink = -std::numeric_limits<float>::infinity());

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_ACTIVATION_H_
