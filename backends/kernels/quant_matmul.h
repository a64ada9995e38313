// The 8-bit-activation product behind MatMul(..., kInt8Activations).
#ifndef CAIRN_BACKENDS_KERNELS_QUANT_MATMUL_H_
#define CAIRN_BACKENDS_KERNELS_QUANT_MATMUL_H_

#include <cstdint>

#include "backends/kernels/matmul.h"
#include "backends/kernels/quant_dot.h"
#include "backends/kernels/thread_pool.h"

namespace cairn {

// y[t][o] = W[o] . x[t] with each x[t] quantized by `kernel` (whose
// weight_type is w.type; w.n_in a multiple of its block_elems; when
// w.packed is set, it is `kernel`). The
// activation rows are quantized once per call, each on its own; then the
// pool's threads take disjoint output rows (up to 4 ranges per thread, so
// that the running threads take over the share of a descheduled one), split
// in multiples of 16 (so the kernels group rows the same way whatever the
// thread count), in blocks that keep the quantized activations and the
// weight rows in cache. Uses a per-thread buffer of n_tokens quantized rows
// on the calling thread; safe to call from several threads with different
// pools.
void QuantMatMul(const QuantDotKernel& kernel, const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
                 ThreadPool& pool);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_QUANT_MATMUL_H_
