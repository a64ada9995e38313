// Integer dot products of quantized weight rows with activations quantized to
// 8 bits: the fast path for quantized weights. The activations of a product
// are quantized once, in the block layout the weight type pairs with (q8_0
// blocks of 32 for Q4_0 and Q8_0, q8_K blocks of 256 for the K-quants), and
// each block product runs in integer lanes (AVX-512 VNNI, AVX2 maddubs, or
// portable C++), scaled to F32 once per block. Results differ from the exact
// F32 product by the 8-bit rounding of the activations (what llama.cpp's CPU
// path computes), so callers choose this path explicitly (MatMulPrecision).
#ifndef CAIRN_BACKENDS_KERNELS_QUANT_DOT_H_
#define CAIRN_BACKENDS_KERNELS_QUANT_DOT_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "backends/model/ggml_type.h"

namespace cairn {

// One implementation of the integer path for one weight type on one
// instruction set. Stateless; all functions are thread-safe.
struct QuantDotKernel {
  GgmlType weight_type;
  std::string_view isa;  // "avx512vnni", "avx2" or "portable"
  // Elements per activation block; rows (n) are a multiple of it.
  int64_t block_elems;
  // Bytes of one quantized activation row of n elements.
  size_t (*activation_row_bytes)(int64_t n);
  // qx <- x quantized to 8 bits (n elements, activation_row_bytes(n) bytes).
  void (*quantize)(const float* x, int64_t n, uint8_t* qx);
  // y[t * ldy + r] = W[r] . X[t] for r < n_rows, t < n_tokens, where weight
  // row r starts at w + r * w_stride and quantized activation row t at
  // qx + t * qx_stride, each of n elements. Any n_rows and n_tokens >= 1;
  // implementations block rows and tokens in registers so that each weight
  // block is read once per group of tokens.
  void (*dot)(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
              int64_t n, float* y, int64_t ldy);
  // Every path of `dot` (decode tiles, prompt panels) computes an output the
  // same way, bit for bit, as the portable kernel does: a token's result
  // does not depend on the other tokens of the call (MatMulPrecision). True
  // for all but the AVX-512 Q8_0/Q4_0 kernel, whose prompt panels round
  // differently from its tiles.
  bool batch_invariant;

  // --- Optional packed layout (pack_rows 0 and null functions: the kernel
  // reads GGUF rows only). Weights packed once at load, in a layout the
  // kernel reads with fewer instructions than GGUF rows (decode steps are
  // otherwise bound by unpacking a block, not by memory): groups of
  // pack_rows consecutive rows, each group taking exactly the bytes of its
  // rows and the same place, so a matrix's size and the offset of every
  // group stay those of GGUF; rows past the last whole group stay GGUF rows
  // and go through `dot`. Only the kernel that packed a matrix reads it
  // (WeightMatrix::packed); nothing else may (dequantizing, row lookups).
  int64_t pack_rows = 0;  // when set, divides 16 (QuantMatMul splits rows in multiples of 16)
  // out <- the n_rows rows (a multiple of pack_rows) of n elements at w
  // (GGUF rows, row stride = the type's row bytes), packed; w and out do
  // not overlap.
  void (*pack)(const uint8_t* w, int64_t n_rows, int64_t n, uint8_t* out) = nullptr;
  // As `dot` for n_rows (a multiple of pack_rows) packed rows at w, with
  // the same bits as `dot` on the GGUF rows they were packed from, for any
  // n_tokens.
  void (*packed_dot)(const uint8_t* w, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens, int64_t n,
                     float* y, int64_t ldy) = nullptr;
};

// The fastest kernel for `type` that this CPU can run (chosen at run time, so
// one binary runs everywhere), or null when `type` has no integer path
// (F32, F16, BF16, ...). The environment variable CAIRN_ISA (avx512vnni,
// avx2 or portable) caps the choice, for benchmarks and tests; any other
// value is ignored with one warning on stderr.
const QuantDotKernel* FindQuantDot(GgmlType type);

// Every kernel for `type` this CPU can run, fastest first (tests compare
// them with each other and with the exact product).
std::vector<const QuantDotKernel*> QuantDotKernelsFor(GgmlType type);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_QUANT_DOT_H_
