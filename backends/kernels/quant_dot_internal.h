// Private to the quant_dot implementation files: the per-ISA kernel tables
// and the q8_0 activation layout they share (the ISAs: cpu_isa.h).
//
// Each ISA's kernels live in their own file compiled with that ISA's flags
// (backends/kernels/CMakeLists.txt), so that a binary built without
// -march=native still contains every variant and quant_dot.cc picks one at
// run time. Those files must therefore not emit any out-of-line function a
// file compiled for another ISA could share (the linker keeps one copy of an
// inline function or template, possibly the AVX-512 one): they expose plain
// `const QuantDotKernel` objects only, and the helpers below sit in an
// anonymous namespace so every file gets its own copy.
#ifndef CAIRN_BACKENDS_KERNELS_QUANT_DOT_INTERNAL_H_
#define CAIRN_BACKENDS_KERNELS_QUANT_DOT_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/kernels/cpu_isa.h"
#include "backends/kernels/quant_dot.h"

namespace cairn {

// A kernel family: its kernels built for `isa` (one per weight type it
// covers). quant_dot.cc lists the families; a new family is one line there
// and its declaration here.
using KernelFamily = std::vector<const QuantDotKernel*> (*)(Isa isa);

// Q8_0 and Q4_0 weights with q8_0 activations (quant_dot_block_*.cc).
std::vector<const QuantDotKernel*> BlockQuantKernels(Isa isa);

// ---------------------------------------------------------------- q8_0 activations
// One activation row of n elements (n a multiple of 32, nb = n / 32 blocks):
//   float   d[nb]    block scale, amax / 127
//   int32_t sum[nb]  sum of the block's 32 quantized values (Q4_0 weights
//                    store value + 8, so their dot subtracts 8 * sum)
//   int8_t  q[n]     round(x / d), nearest even, in [-127, 127]
// padded to a multiple of 64 bytes so that consecutive rows stay aligned.
// Every ISA uses this one quantizer (defined in quant_dot_block_portable.cc):
// identical activation bytes whichever kernel runs, so the kernels differ
// only in the order of their float additions.
size_t Q8ActivationRowBytes(int64_t n);
void QuantizeQ8Activations(const float* x, int64_t n, uint8_t* qx);

// Kernel tables, one object per ISA file.
extern const QuantDotKernel kQ8_0Portable, kQ4_0Portable;
extern const QuantDotKernel kQ8_0Avx2, kQ4_0Avx2;
extern const QuantDotKernel kQ8_0Avx512Vnni, kQ4_0Avx512Vnni;

namespace {  // NOLINT: one copy per ISA file, see the top of this header.

constexpr int64_t kQ8BlockElems = 32;

struct Q8ActivationRow {
  const float* d;
  const int32_t* sum;
  const int8_t* q;
};

inline Q8ActivationRow ViewQ8Activations(const uint8_t* row, int64_t nb) {
  return {reinterpret_cast<const float*>(row), reinterpret_cast<const int32_t*>(row + 4 * nb),
          reinterpret_cast<const int8_t*>(row + 8 * nb)};
}

// The split of a prompt product between a kernel's panels and its row
// kernel: with at least min_tokens tokens and panel_rows rows, panels(m)
// computes the first m rows (n_rows rounded down to a multiple of
// panel_rows), and *w, *y and *n_rows move past them (*n_rows 0: done).
template <class Panels>
inline void TakePanelRows(int64_t panel_rows, int64_t min_tokens, int64_t n_tokens, Panels&& panels, const uint8_t** w,
                          size_t w_stride, int64_t* n_rows, float** y) {
  if (n_tokens < min_tokens || *n_rows < panel_rows) return;
  const int64_t m = *n_rows / panel_rows * panel_rows;
  panels(m);
  *w += m * w_stride;
  *y += m;
  *n_rows -= m;
}

// Weight block layouts (GGUF): an F16 scale, then the quants.
constexpr int64_t kQ8_0BlockBytes = 34;  // d, int8 q[32]
constexpr int64_t kQ4_0BlockBytes = 18;  // d, nibbles: q[j] low = element j, high = element j + 16

}  // namespace
}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_QUANT_DOT_INTERNAL_H_
