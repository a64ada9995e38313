// Products of F32 activations with F32, F16 or BF16 weights on cairn's own
// kernels (no BLAS): a register-blocked GEMM for prompts, a prefetching row
// stream for decode steps. The kernels are AVX-512 (F, BW, VL; F32 and F16)
// and AVX2 (+FMA, F16C; the row stream, F32, F16 and BF16), in every build
// whatever CAIRN_NATIVE says, and run where the CPU has them (cpu_isa.h);
// where GemmTakes or StreamTakes is false (no such CPU, a CAIRN_ISA cap, or
// another type), callers keep their BLAS or portable path.
#ifndef CAIRN_BACKENDS_KERNELS_GEMM_H_
#define CAIRN_BACKENDS_KERNELS_GEMM_H_

#include <cstdint>

#include "backends/kernels/matmul.h"
#include "backends/kernels/thread_pool.h"

namespace cairn {

// True for the weight types GemmFloatWeights takes (F32, F16) when this CPU
// runs the kernels and CAIRN_ISA allows AVX-512; false for every type
// otherwise.
bool GemmTakes(GgmlType type);

// y[t][o] = sum_i x[t][i] * W[o][i] for t < n_tokens (x: [n_tokens][n_in],
// y: [n_tokens][n_out], row-major, not aliased), w.type F32 or F16
// (GemmTakes). Each y element is an F32 sum over i in ascending order in
// blocks (partial sums of up to 2048 inputs added in order), the same whatever
// the thread count or how rows are split, so results are reproducible; F16
// weights are widened exactly. x is packed once per call (into a buffer of
// the calling thread, reused across calls) and shared by the pool's threads;
// each thread streams a contiguous part of the weight rows and widens /
// transposes them panel by panel (64 rows) into its own L2-resident buffer.
// Does nothing when GemmTakes(w.type) is false. Meant for many tokens
// (prompts): for a few tokens the packing costs more than it saves. Thread-safe for distinct y; uses `pool` (one job at
// a time).
void GemmFloatWeights(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

// True for the weight types StreamFloatWeights takes: F32 and F16 where
// GemmTakes them (the AVX-512 row stream); otherwise F32, F16 and BF16 where
// the CPU runs AVX2, FMA and F16C and CAIRN_ISA is not portable (the AVX2
// row stream, which also takes BF16 on AVX-512 CPUs); false for every type
// otherwise.
bool StreamTakes(GgmlType type);

// The same product for a few tokens (decode steps, 1 to 3 tokens in
// practice): each weight row is read once, in order, with software prefetch
// ahead of it, for up to 3 tokens at a time; each thread streams a
// contiguous part of the rows, the rows split evenly. Same contract as
// GemmFloatWeights otherwise (results do not depend on the thread count),
// with StreamTakes in place of GemmTakes. BF16 weights are widened exactly.
void StreamFloatWeights(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_GEMM_H_
