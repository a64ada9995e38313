// Conversion of GGUF tensor rows to F32, and the half-precision helpers the
// block formats use. Dequantization is exact: it reproduces the reference
// implementation bit for bit.
#ifndef CAIRN_BACKENDS_MODEL_DEQUANT_H_
#define CAIRN_BACKENDS_MODEL_DEQUANT_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/model/ggml_type.h"
#include "backends/model/gguf.h"

namespace cairn {

float Fp16ToFp32(uint16_t h);
uint16_t Fp32ToFp16(float f);  // round to nearest even
inline float Bf16ToFp32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
uint16_t Fp32ToBf16(float f);  // round to nearest even, NaN kept quiet

// Writes `n` floats to `dst` from `n` elements of `type` at `src`.
// Precondition: n is a multiple of the type's block size (the reader
// guarantees this for every row of every tensor it accepts).
void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);

// The whole tensor as F32, row-major with ne[0] innermost.
std::vector<float> DequantizeTensor(const TensorInfo& tensor);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MODEL_DEQUANT_H_
