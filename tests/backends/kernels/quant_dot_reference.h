// What QuantMatMul must equal, composed from a kernel's own parts: every
// activation row quantized alone, then the kernel's dot over all rows.
// Shared by the block (Q8_0, Q4_0) and K-quant kernel tests.
#ifndef CAIRN_TESTS_BACKENDS_KERNELS_QUANT_DOT_REFERENCE_H_
#define CAIRN_TESTS_BACKENDS_KERNELS_QUANT_DOT_REFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/kernels/quant_dot.h"

namespace cairn {

// y[t][o] for t < tokens, o < n_out: `w` holds n_out rows of `row_bytes`,
// `x` tokens rows of n floats.
inline std::vector<float> QuantizeThenDot(const QuantDotKernel& k, const uint8_t* w, size_t row_bytes, int64_t n_out,
                                          const float* x, int64_t tokens, int64_t n) {
  const size_t qs = k.activation_row_bytes(n);
  std::vector<uint8_t> qx(qs * static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) k.quantize(x + t * n, n, qx.data() + t * qs);
  std::vector<float> y(static_cast<size_t>(tokens * n_out));
  k.dot(w, row_bytes, n_out, qx.data(), qs, tokens, n, y.data(), n_out);
  return y;
}

}  // namespace cairn

#endif  // CAIRN_TESTS_BACKENDS_KERNELS_QUANT_DOT_REFERENCE_H_
