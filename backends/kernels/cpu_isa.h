// The instruction sets of the kernels chosen at run time (the integer dots
// of quant_dot.h, the F32/F16 GEMM of gemm.h): what this CPU runs, and the
// CAIRN_ISA cap on the choice. The one place that detects CPU features, so
// every kernel family agrees on what a cap means.
#ifndef CAIRN_BACKENDS_KERNELS_CPU_ISA_H_
#define CAIRN_BACKENDS_KERNELS_CPU_ISA_H_

#include <string_view>

namespace cairn {

// Fastest first. A CPU that runs one also runs the ones after it.
enum class Isa { kAvx512Vnni, kAvx2, kPortable };

// "avx512vnni", "avx2" or "portable": the CAIRN_ISA spelling.
std::string_view IsaName(Isa isa);

// Whether this CPU, and the OS (saved register state), runs `isa`:
// kAvx512Vnni is AVX-512 F, BW, VL and VNNI with AVX2, FMA and F16C; kAvx2
// is AVX2, FMA and F16C.
bool CpuRuns(Isa isa);

// AVX-512 F, BW and VL with FMA and F16C: the F32/F16 GEMM's set
// (gemm_avx512.cc), kAvx512Vnni without VNNI.
bool CpuRunsAvx512Float();

// The environment variable CAIRN_ISA (avx512vnni, avx2 or portable) as read
// on the first call (kAvx512Vnni when unset): kernels of a faster ISA are not
// chosen, for benchmarks and tests; the AVX-512 GEMM counts as avx512vnni.
// Any other value is ignored with one warning on stderr: a typo must not
// silently make a server 3x slower, nor stop it. Thread-safe.
Isa IsaCap();

// The fastest ISA this CPU runs at or below IsaCap().
Isa BestIsa();

// AVX2, FMA and F16C run here and CAIRN_ISA allows them (avx2 or above):
// the kernel families with only an AVX2 and a portable form (the F32/F16
// row stream, attention's tiles) take the AVX2 one. Read once.
bool Avx2Allowed();

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_CPU_ISA_H_
