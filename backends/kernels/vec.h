// Small F32 vector primitives shared by the kernels. All pointers must hold
// `n` floats; outputs may alias inputs only where stated. Thread-safe (pure).
#ifndef CAIRN_BACKENDS_KERNELS_VEC_H_
#define CAIRN_BACKENDS_KERNELS_VEC_H_

#include <cstdint>

#include "backends/model/ggml_type.h"

namespace cairn {

// sum_i a[i] * b[i], accumulated in F32 lanes.
float DotF32(const float* a, const float* b, int64_t n);

// y[i] += a * x[i]  (y may not alias x).
void AxpyF32(float a, const float* x, float* y, int64_t n);

// y[i] = a[i] + b[i]  (y may alias a or b).
void AddF32(const float* a, const float* b, float* y, int64_t n);

// Dot product of one weight row of `type` (n elements, n a multiple of the
// type's block size) with F32 activations, dequantizing on the fly. Keeps the
// activations in F32: the result equals DequantizeRow + DotF32 up to the
// order of F32 rounding. Vectorized for F32, F16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K
// and Q6_K (AVX-512); other types dequantize block-wise into a stack buffer.
float DotRow(GgmlType type, const uint8_t* row, const float* x, int64_t n);

// DequantizeRow with the same results bit for bit, vectorized for F16, Q8_0,
// Q4_0, Q4_1, Q4_K, Q5_K and Q6_K (the sgemm tiles of prompt products).
void DequantizeRowFast(GgmlType type, const uint8_t* row, float* y, int64_t n);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_VEC_H_
