// Buffers, threads and the run-time choice; the arithmetic is in
// gemm_avx512.cc and gemm_avx2.cc (each compiled for its ISA whatever this
// file's flags are).
#include "backends/kernels/gemm.h"

#include <algorithm>
#include <vector>

#include "backends/kernels/cpu_isa.h"
#include "backends/kernels/gemm_avx2.h"
#include "backends/kernels/gemm_avx512.h"

namespace cairn {
namespace {

using gemm_avx512::kOuts;
using gemm_avx512::kTokens;

// Row ranges per thread of a decode product (ThreadPool::ParallelFor): a
// thread descheduled on a loaded machine then holds back an eighth of the
// rows, not half.
constexpr int kStreamChunksPerThread = 4;

// Read once: the CPU and the CAIRN_ISA cap do not change while a process
// runs.
bool Avx512Allowed() {
  static const bool allowed = IsaCap() == Isa::kAvx512Vnni && CpuRunsAvx512Float();
  return allowed;
}

bool Avx512Takes(GgmlType type) { return (type == GgmlType::kF32 || type == GgmlType::kF16) && Avx512Allowed(); }

bool Avx2Takes(GgmlType type) {
  return (type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16) && Avx2Allowed();
}

gemm_avx512::FloatRows RowsOf(const WeightMatrix& w) {
  return {w.data, w.row_bytes(), w.n_in, w.n_out, w.type == GgmlType::kF16};
}

// 64 bytes, aligned: the unit of the per-thread buffers.
struct alignas(64) Line {
  float f[16];
};

// A 64-byte-aligned buffer (one per thread), grown on demand and kept.
float* ThreadBuffer(std::vector<Line>& buf, int64_t floats) {
  const size_t n = static_cast<size_t>((floats + 15) / 16);
  if (buf.size() < n) buf.resize(n);
  return reinterpret_cast<float*>(buf.data());
}

}  // namespace

bool GemmTakes(GgmlType type) { return Avx512Takes(type); }

bool StreamTakes(GgmlType type) { return Avx512Takes(type) || Avx2Takes(type); }

void GemmFloatWeights(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  if (n_tokens <= 0 || w.n_out <= 0 || !Avx512Allowed()) return;
  const int64_t K = w.n_in;
  const int64_t n_tb = (n_tokens + kTokens - 1) / kTokens;
  thread_local std::vector<Line> xbuf;
  float* xp = ThreadBuffer(xbuf, n_tb * kTokens * std::max<int64_t>(K, 1));
  pool.ParallelFor(n_tb, 1, [&](int64_t b, int64_t e) {
    for (int64_t tb = b; tb < e; ++tb) gemm_avx512::PackTokens(x, n_tokens, K, tb, xp);
  });
  if (K == 0) {
    for (int64_t t = 0; t < n_tokens; ++t) std::fill_n(y + t * w.n_out, w.n_out, 0.0f);
    return;
  }
  const int64_t n_panels = (w.n_out + kOuts - 1) / kOuts;
  // Contiguous halves of the panels: each thread streams its own rows.
  // Panels go in groups whose partial sums (up to 2 MiB: 16 panels at 512
  // tokens) are revisited once per input block: on ffn_down (3 input
  // blocks) groups of 2 MiB ran at 0.9x sgemm, of 128 KiB at 0.7x; the
  // packed activations are read once per group and input block.
  // Equal blocks (a multiple of 16 inputs) of at most kMaxBlockIn.
  const int64_t n_blocks = (K + gemm_avx512::kMaxBlockIn - 1) / gemm_avx512::kMaxBlockIn;
  const int64_t block_in = ((K + n_blocks - 1) / n_blocks + 15) / 16 * 16;
  const int64_t group = std::max<int64_t>(1, gemm_avx512::kGroupOutputFloats / (n_tokens * kOuts));
  const gemm_avx512::FloatRows rows = RowsOf(w);
  pool.ParallelFor(n_panels, 1, [&](int64_t p_begin, int64_t p_end) {
    thread_local std::vector<Line> wbuf;
    float* wp = ThreadBuffer(wbuf, kOuts * block_in);
    gemm_avx512::GemmPanels(rows, xp, n_tokens, y, block_in, group, p_begin, p_end, wp);
  });
}

void StreamFloatWeights(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool) {
  if (n_tokens <= 0 || w.n_out <= 0) return;
  // Contiguous ranges: each streams its rows in order.
  if (Avx512Takes(w.type)) {
    const gemm_avx512::FloatRows rows = RowsOf(w);
    pool.ParallelFor(
        w.n_out, 16, [&](int64_t r0, int64_t r1) { gemm_avx512::StreamRows(rows, x, n_tokens, y, r0, r1); },
        kStreamChunksPerThread);
  } else if (Avx2Takes(w.type)) {
    const gemm_avx2::Element element = w.type == GgmlType::kF32   ? gemm_avx2::Element::kF32
                                       : w.type == GgmlType::kF16 ? gemm_avx2::Element::kF16
                                                                  : gemm_avx2::Element::kBF16;
    const gemm_avx2::FloatRows rows{w.data, w.row_bytes(), w.n_in, w.n_out, element};
    pool.ParallelFor(
        w.n_out, 16, [&](int64_t r0, int64_t r1) { gemm_avx2::StreamRows(rows, x, n_tokens, y, r0, r1); },
        kStreamChunksPerThread);
  }
}

}  // namespace cairn
