// Private to gemm.cc: the AVX2 (+FMA, F16C) kernels of the F32/F16/BF16
// products (gemm.h), for CPUs without AVX-512 (and for BF16 weights on every
// x86 CPU with AVX2). gemm_avx2.cc is compiled with those flags whatever
// CAIRN_NATIVE says, so, as for gemm_avx512.h, it emits no out-of-line code a
// portable file could share through the linker: helpers in an unnamed
// namespace, buffers and threads in gemm.cc, and only the functions below,
// on plain arguments, as external symbols.
#ifndef CAIRN_BACKENDS_KERNELS_GEMM_AVX2_H_
#define CAIRN_BACKENDS_KERNELS_GEMM_AVX2_H_

#include <cstddef>
#include <cstdint>

namespace cairn::gemm_avx2 {

// How the weights are stored: F32, or 16-bit floats widened exactly.
enum class Element { kF32, kF16, kBF16 };

// The weight matrix as the kernels read it: n_out rows of n_in weights,
// row_bytes apart.
struct FloatRows {
  const uint8_t* data;
  size_t row_bytes;
  int64_t n_in;
  int64_t n_out;
  Element element;
};

// y[t][o] = W[o] . x[t] for rows [r0, r1) and every token (x: [n_tokens][n_in],
// y: [n_tokens][n_out]): each row is read once, in order and prefetched
// ahead, per group of up to 3 tokens, whose activations stay in L1 (a
// single token streams four rows at a time). Each y element is the same F32
// sum whatever r0, r1 and the grouping of tokens.
void StreamRows(const FloatRows& w, const float* x, int64_t n_tokens, float* y, int64_t r0, int64_t r1);

}  // namespace cairn::gemm_avx2

#endif  // CAIRN_BACKENDS_KERNELS_GEMM_AVX2_H_
