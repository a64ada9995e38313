// Private to the quant_dot kernels: the integer-dot kernels of the K-quant
// weight types (Q4_K, Q5_K, Q6_K) with q8_K activations, one kernel family
// (quant_dot_internal.h) over the files quant_dot_kquant_<isa>.cc. Only
// quant_dot.cc (the registry), the kernel files and tests/benchmarks
// include it.
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
#include "backends/kernels/quant_dot_internal.h"

namespace cairn {

inline constexpr int64_t kQ8KBlockElems = 256;
inline constexpr size_t kQ8KBlockBytes = 4 + 256 + 2 * 16;

// Every kernel, whatever its path (decode rows, prompt panels) and ISA,
// computes each output the same way, so that a row's result does not depend
// on the shape of the call (which other rows and tokens it came with) nor on
// the ISA: per block b, in order, with the block's exact integer products
//   dot = sum_g scale_g * (u . q)_g   and   mins = sum_g min_g * sums_g,
//   acc = (acc + float(dot) * (d * dx)) - float(mins) * (dmin * dx)
// each operation rounded to F32 on its own (no fused multiply-add; the
// kernel files are built with -ffp-contract=off). AccumulateBlock spells
// it for scalar code; vector code does the same per lane.
namespace {  // NOLINT: one copy per ISA file (see quant_dot_internal.h)
inline float AccumulateBlock(float acc, int32_t dot, int32_t mins, float d_dx, float dmin_dx) {
  const float a = acc + static_cast<float>(dot) * d_dx;
  return a - static_cast<float>(mins) * dmin_dx;
}
}  // namespace

// The Q4_K, Q5_K and Q6_K kernels compiled for `isa` (a KernelFamily); the
// caller checks that the CPU runs `isa` before calling them.
std::vector<const QuantDotKernel*> KQuantKernels(Isa isa);

// The kernel objects, one set per ISA file (each compiled with its own
// target flags; see quant_dot_internal.h for why they expose nothing else).
extern const QuantDotKernel kQ4_KPortable, kQ5_KPortable, kQ6_KPortable;
extern const QuantDotKernel kQ4_KAvx2, kQ5_KAvx2, kQ6_KAvx2;
extern const QuantDotKernel kQ4_KAvx512Vnni, kQ5_KAvx512Vnni, kQ6_KAvx512Vnni;

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_QUANT_DOT_KQUANT_H_
