// Private to the quant_dot kernels: the integer-dot kernels of the K-quant
// weight types (Q4_K, Q5_K, Q6_K) with q8_K activations, one table per
// instruction set. Only quant_dot.cc (the registry) and the tests include it.
//
// q8_K activation block (256 elements, kQ8KBlockBytes bytes):
//   float d            scale, amax / 127 (0 for an all-zero block)
//   int8  q[256]       round-to-nearest-even(x / d), in [-127, 127]
//   int16 sums[16]     sum of q over each group of 16 elements
// The sums carry the part of a block product that does not depend on the
// weight quants: the mins of Q4_K / Q5_K and the -32 offset of Q6_K. Every
// instruction set writes the same bytes for the same input.
#ifndef CAIRN_BACKENDS_KERNELS_QUANT_DOT_KQUANT_H_
#define CAIRN_BACKENDS_KERNELS_QUANT_DOT_KQUANT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/kernels/quant_dot.h"

namespace cairn {

#ifndef CAIRN_KERNELS_QUANT_DOT_ISA_DEFINED
#define CAIRN_KERNELS_QUANT_DOT_ISA_DEFINED
// The instruction sets a quant_dot kernel can be compiled for.
enum class Isa { kAvx512Vnni, kAvx2, kPortable };
#endif

inline constexpr int64_t kQ8KBlockElems = 256;
inline constexpr size_t kQ8KBlockBytes = 4 + 256 + 2 * 16;

// The Q4_K, Q5_K and Q6_K kernels compiled for `isa` (empty for none). The
// caller checks that the CPU runs `isa` before calling them.
std::vector<const QuantDotKernel*> KQuantKernels(Isa isa);

// Per instruction set, defined in quant_dot_kquant_<isa>.cc (each file is
// compiled with its own target flags).
std::vector<const QuantDotKernel*> KQuantKernelsAvx512Vnni();
std::vector<const QuantDotKernel*> KQuantKernelsAvx2();
std::vector<const QuantDotKernel*> KQuantKernelsPortable();

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_QUANT_DOT_KQUANT_H_
