#include "backends/kernels/quant_matmul.h"

#include <algorithm>
#include <vector>

namespace cairn {
namespace {

// A thread's output rows go in blocks of about this many weight bytes, which
// stay in L2 while every group of tokens passes over them (the first group
// streams them from memory).
constexpr int64_t kWeightBlockBytes = 512 << 10;
// Tokens go in groups of about this many quantized activation bytes, which
// stay in L2 while the kernel walks the block's rows (4 at a time in L1).
constexpr int64_t kActivationGroupBytes = 512 << 10;
// Output rows are split (between threads and into blocks) in multiples of
// this: kernels that group rows (the AVX-512 prompt kernel packs 16) then
// see the same groups whatever the thread count, so results do not depend
// on it. Also the least rows per pool task.
constexpr int64_t kRowGroup = 16;
// Row ranges per thread (ThreadPool::ParallelFor): a thread descheduled on
// a loaded machine then holds back a quarter of its share, which the others
// take, instead of all of it.
constexpr int kChunksPerThread = 4;

}  // namespace

void QuantMatMul(const QuantDotKernel& kernel, const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
                 ThreadPool& pool) {
  const int64_t n = w.n_in;
  const size_t qx_stride = kernel.activation_row_bytes(n);
  // The calling thread's buffer; the pool's threads reach it through `q`
  // (naming the thread_local inside the lambdas would give each its own).
  thread_local std::vector<uint8_t> buffer;
  buffer.resize(qx_stride * static_cast<size_t>(n_tokens));
  uint8_t* const q = buffer.data();
  if (n_tokens == 1) {
    kernel.quantize(x, n, q);
  } else {
    pool.ParallelFor(n_tokens, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) kernel.quantize(x + t * n, n, q + t * qx_stride);
    });
  }

  const size_t rb = w.row_bytes();
  const int64_t block_rows =
      std::max<int64_t>(kRowGroup, kWeightBlockBytes / static_cast<int64_t>(rb) / kRowGroup * kRowGroup);
  const int64_t group = std::max<int64_t>(1, kActivationGroupBytes / static_cast<int64_t>(qx_stride));
  const int64_t n_groups = (w.n_out + kRowGroup - 1) / kRowGroup;
  // Rows below packed_end are in kernel's packed layout (w.packed).
  const int64_t packed_end = w.packed != nullptr ? w.n_out / kernel.pack_rows * kernel.pack_rows : 0;
  pool.ParallelFor(
      n_groups, 1,
      [&](int64_t group_begin, int64_t group_end) {
        const int64_t begin = group_begin * kRowGroup, end = std::min(group_end * kRowGroup, w.n_out);
        for (int64_t r0 = begin; r0 < end; r0 += block_rows) {
          const int64_t rows = std::min(block_rows, end - r0);
          // Packed groups first (r0 is a multiple of kRowGroup, hence of
          // pack_rows), then GGUF rows.
          const int64_t packed = std::clamp(packed_end - r0, int64_t{0}, rows);
          for (int64_t t0 = 0; t0 < n_tokens; t0 += group) {
            const int64_t g = std::min(group, n_tokens - t0);
            float* const yt = y + t0 * w.n_out + r0;
            if (packed > 0)
              kernel.packed_dot(w.data + r0 * rb, packed, q + t0 * qx_stride, qx_stride, g, n, yt, w.n_out);
            if (packed < rows) {
              kernel.dot(w.data + (r0 + packed) * rb, rb, rows - packed, q + t0 * qx_stride, qx_stride, g, n,
                         yt + packed, w.n_out);
            }
          }
        }
      },
      kChunksPerThread);
}

}  // namespace cairn
