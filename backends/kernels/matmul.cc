#include "backends/kernels/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "backends/kernels/vec.h"
#include "backends/model/dequant.h"

namespace cairn {
namespace {

// Below this many tokens the fused dequantize-and-dot kernel wins: the
// weights are streamed once and each row stays in L1 across the tokens.
constexpr int64_t kGemmMinTokens = 4;
// Bytes of F32 weights dequantized per sgemm call on the quantized prompt
// path (per thread, kept in a thread-local buffer). Large tiles matter: each
// call packs all of x again, and narrow sgemm calls run far below peak.
constexpr int64_t kTileBytes = 8 << 20;

// Our pool splits the output columns and each thread calls a single-threaded
// sgemm: OpenBLAS's own threads would otherwise keep spinning after a GEMM
// and fight the pool's threads for the same cores.
void UseSingleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void DequantizeRows(const WeightMatrix& w, int64_t row0, int64_t rows, float* dst) {
  const size_t rb = w.row_bytes();
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRowFast(w.type, w.data + (row0 + r) * rb, dst + r * w.n_in, w.n_in);
  }
}

void GemmRange(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t begin,
               int64_t end) {
  const int M = static_cast<int>(n_tokens);
  const int K = static_cast<int>(w.n_in);
  const int ldc = static_cast<int>(w.n_out);
  if (w.type == GgmlType::kF32) {
    const float* wf = reinterpret_cast<const float*>(w.data) + begin * w.n_in;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, static_cast<int>(end - begin), K, 1.0f, x, K,
                wf, K, 0.0f, y + begin, ldc);
    return;
  }
  const int64_t tile = std::max<int64_t>(16, kTileBytes / (w.n_in * 4));
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(tile * w.n_in));
  for (int64_t r = begin; r < end; r += tile) {
    const int64_t rows = std::min(tile, end - r);
    DequantizeRows(w, r, rows, scratch.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, static_cast<int>(rows), K, 1.0f, x, K,
                scratch.data(), K, 0.0f, y + r, ldc);
  }
}

}  // namespace

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  if (n_tokens <= 0 || w.n_out <= 0) return;
  if (n_tokens >= kGemmMinTokens) {
    UseSingleThreadedBlas();
    // Column blocks of at least 64 rows keep each sgemm call efficient.
    pool.ParallelFor(w.n_out, 64, [&](int64_t begin, int64_t end) {
      GemmRange(w, x, n_tokens, y, begin, end);
    });
    return;
  }
  const size_t rb = w.row_bytes();
  pool.ParallelFor(w.n_out, 16, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const uint8_t* row = w.data + o * rb;
      for (int64_t t = 0; t < n_tokens; ++t) {
        y[t * w.n_out + o] = DotRow(w.type, row, x + t * w.n_in, w.n_in);
      }
    }
  });
}

}  // namespace cairn
