// Products of activations with weight matrices of any GGUF type.
#ifndef CAIRN_BACKENDS_KERNELS_MATMUL_H_
#define CAIRN_BACKENDS_KERNELS_MATMUL_H_

#include <cstdint>

#include "backends/kernels/quant_dot.h"
#include "backends/kernels/thread_pool.h"
#include "backends/model/gguf.h"

namespace cairn {

// A weight matrix W of n_out rows of n_in elements (GGUF shape [n_in, n_out]),
// in any type the reader dequantizes. Points into model memory; not owned.
struct WeightMatrix {
  GgmlType type = GgmlType::kF32;
  int64_t n_in = 0;
  int64_t n_out = 0;
  const uint8_t* data = nullptr;
  // Null: GGUF rows. Otherwise the kernel whose packed layout the whole
  // groups of rows are in (QuantDotKernel::pack; PackWeights below): only
  // MatMul with kInt8Activations may read such a matrix.
  const QuantDotKernel* packed = nullptr;

  static WeightMatrix FromTensor(const TensorInfo& t) { return WeightMatrix{t.type, t.shape[0], t.n_rows(), t.data}; }
  size_t row_bytes() const { return RowBytes(type, n_in); }
  size_t bytes() const { return row_bytes() * static_cast<size_t>(n_out); }
};

// The kernel that MatMul(kInt8Activations) runs for `type` on this CPU when
// it has a packed layout and a matrix of n_out rows holds at least one of
// its groups; null otherwise (the matrix stays in GGUF rows).
const QuantDotKernel* PackingKernel(GgmlType type, int64_t n_in, int64_t n_out);

// w (GGUF rows) copied to `out` (w.bytes() bytes) in the layout of
// PackingKernel(w.type, w.n_in, w.n_out), which must not be null: its whole
// groups packed, the rows past them copied as they are. Returns the packed
// matrix over `out`. Uses `pool` for parallelism.
WeightMatrix PackWeights(const WeightMatrix& w, uint8_t* out, ThreadPool& pool);

// How a product may round its activations.
enum class MatMulPrecision {
  // F32 activations: the result matches a dequantized F32 model to rounding
  // (what the golden files hold).
  kExact,
  // For weight types with an integer kernel (quant_dot.h: Q8_0, Q4_0, and
  // the K-quants), the activations are quantized to 8 bits per block of 32
  // or 256 first, as llama.cpp's CPU path does; 2-3x faster prompts on
  // quantized weights. Each activation row is quantized on its own, and
  // every path of a kernel computes a row's outputs the same way, so a
  // row's result does not depend on the other rows of the call (how a
  // server batched a sequence's tokens) nor on the thread count: bit for
  // bit with the K-quant kernels of every ISA and the Q8_0/Q4_0 kernels of
  // AVX2 and portable C++; the AVX-512 Q8_0/Q4_0 prompt kernel (8 rows or
  // more) still rounds differently from its decode tiles. Types without an
  // integer kernel (F32, F16, ...) compute exactly.
  kInt8Activations,
};

// y[t][o] = sum_i x[t][i] * W[o][i] for t < n_tokens
// (x: [n_tokens][n_in], y: [n_tokens][n_out], both row-major, not aliased).
// With kInt8Activations and a weight type that has an integer kernel, see
// above (backends/kernels/quant_matmul.h); otherwise with F32 activations:
// More than 16 tokens (prompts): F32 and F16 weights go through cairn's own
// GEMM where GemmTakes them (gemm.h, AVX-512 CPUs: activations packed once
// per product, weights widened panel by panel, each thread streaming its
// half of the rows); other types are
// dequantized tile by tile and multiplied with cblas_sgemm; 4 to 16 tokens (batched decode steps): each
// weight row is read once for a group of tokens whose activations fit in L1
// (for wide rows, a register-blocked kernel reads each row once per 4
// tokens); fewer: F32, F16 and BF16 weights through the row stream of
// gemm.h where StreamTakes them (AVX2 or AVX-512), other types a fused
// dequantize-and-dot kernel per token. All paths
// keep activations in F32, so results match a dequantized F32 model to
// rounding. Uses `pool` for parallelism: on the sgemm path each pool thread
// runs a single-threaded sgemm on its block of output columns, so on first use
// OpenBLAS is set to one thread for the whole process
// (openblas_set_num_threads(1)).
// A packed matrix (w.packed) goes through its kernel's packed_dot: same
// results as its GGUF rows; it needs kInt8Activations (aborts otherwise: no
// other path reads the packed layout).
// `precision` has no default on purpose: every call site states whether it
// can take 8-bit activations (a MoE router cannot: its top-k would flip).
void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            MatMulPrecision precision);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_MATMUL_H_
