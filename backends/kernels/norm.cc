#include "backends/kernels/norm.h"

#include <cmath>

namespace cairn {

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void RmsNormRows(const float* x, const float* w, int64_t rows, int64_t n, int64_t stride, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) RmsNorm(x + r * stride, w, n, eps, y + r * stride);
}

}  // namespace cairn
