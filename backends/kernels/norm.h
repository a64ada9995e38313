// Normalizations over rows of F32 activations. Pure functions, thread-safe.
#ifndef CAIRN_BACKENDS_KERNELS_NORM_H_
#define CAIRN_BACKENDS_KERNELS_NORM_H_

#include <cstdint>

namespace cairn {

// RMSNorm of one row: y[i] = x[i] / sqrt(mean(x^2) + eps) * (w ? w[i] : 1).
// The mean of squares is accumulated in double, as the reference does.
// y may alias x.
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y);

// RmsNorm for `rows` rows of `n` elements, each row `stride` floats apart
// (in and out share the stride). Used per head for q/k norms (n = head dim).
void RmsNormRows(const float* x, const float* w, int64_t rows, int64_t n, int64_t stride, float eps, float* y);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_NORM_H_
