// The double-precision reference of the kernel tests that multiply float (or
// dequantized) weights: a dot product and the summed magnitudes of its
// terms, against which a tolerance is relative (cancellation makes the dot
// itself a poor scale).
#ifndef CAIRN_TESTS_BACKENDS_KERNELS_REFERENCE_DOT_H_
#define CAIRN_TESTS_BACKENDS_KERNELS_REFERENCE_DOT_H_

#include <cmath>
#include <cstdint>

namespace cairn {

struct ReferenceDot {
  double value = 0;
  double magnitude = 0;
};

// a . b over n floats, in double.
inline ReferenceDot DotInDouble(const float* a, const float* b, int64_t n) {
  ReferenceDot d;
  for (int64_t i = 0; i < n; ++i) {
    const double p = static_cast<double>(a[i]) * b[i];
    d.value += p;
    d.magnitude += std::fabs(p);
  }
  return d;
}

}  // namespace cairn

#endif  // CAIRN_TESTS_BACKENDS_KERNELS_REFERENCE_DOT_H_
