#include "backends/kernels/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "backends/kernels/gemm.h"
#include "backends/kernels/quant_dot.h"
#include "backends/kernels/quant_matmul.h"
#include "backends/kernels/vec.h"
#include "backends/model/dequant.h"

namespace cairn {
namespace {

// Below this many tokens the fused dequantize-and-dot kernel wins: the
// weights are streamed once and each row stays in L1 across the tokens.
constexpr int64_t kSmallBatchMinTokens = 4;
// Up to this many tokens (a batched decode step of several sequences) the
// small-batch kernels read each weight row once for all tokens: sgemm would
// first pack the whole weight matrix, which costs more than the product at
// this size.
constexpr int64_t kGemmMinTokens = 17;
// The row-streaming kernel reads weights as one sequential stream, like
// single-token decoding, with the tokens' activations in L1: up to this many
// bytes of them (tokens x n_in floats, half of L1) at a time. On a decode
// step of 8 sequences of demo-hybrid-large (n_in 512 to 1536) it took the
// step from 11 to 9 ms against the 4 x 4 blocked kernel, whose four
// interleaved row streams the hardware prefetcher does not follow.
constexpr int64_t kRowStreamMaxActivationBytes = 16 << 10;
// How far ahead (3 KiB) the row-streaming kernel prefetches its weights:
// with T FMAs per cache line the hardware prefetcher alone falls behind.
// Measured best of 1-8 KiB on batched decode steps.
constexpr int64_t kRowStreamPrefetchFloats = 768;
// More tokens than fit that L1 budget go in groups over blocks of this many
// rows (L2-resident between the groups); groups smaller than
// kRowStreamMinGroup lose to the 4 x 4 blocked kernel, which reads the
// activations a quarter as often.
constexpr int64_t kRowStreamBlockRows = 32;
constexpr int64_t kRowStreamMinGroup = 4;
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

void GemmRange(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t begin, int64_t end) {
  const int M = static_cast<int>(n_tokens);
  const int K = static_cast<int>(w.n_in);
  const int ldc = static_cast<int>(w.n_out);
  if (w.type == GgmlType::kF32) {
    const float* wf = reinterpret_cast<const float*>(w.data) + begin * w.n_in;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, static_cast<int>(end - begin), K, 1.0f, x, K, wf, K, 0.0f,
                y + begin, ldc);
    return;
  }
  const int64_t tile = std::max<int64_t>(16, kTileBytes / (w.n_in * 4));
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(tile * w.n_in));
  for (int64_t r = begin; r < end; r += tile) {
    const int64_t rows = std::min(tile, end - r);
    DequantizeRows(w, r, rows, scratch.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, static_cast<int>(rows), K, 1.0f, x, K, scratch.data(), K,
                0.0f, y + r, ldc);
  }
}

// 16 floats: one AVX-512 register (GCC splits it on narrower targets).
// aligned(4) makes dereferencing a V16* an unaligned load.
typedef float V16 __attribute__((vector_size(64), aligned(4)));

float Sum16(V16 v) {
  float s = 0.0f;
  for (int i = 0; i < 16; ++i) s += v[i];
  return s;
}

// y[(t0 + j) * ldy + o0 + r] = rows[r] . xt[j] for r < n_rows, j < nt: an
// R x T block of accumulators stays in registers (loops fully unrolled), so
// each weight row is read once for T tokens. Unused rows and tokens repeat
// the last real one and are not stored. `prefetch` (or null): R rows of K
// floats to fetch while this block computes, one cache line of each per step.
template <int R, int T>
void DotBlock(const float* const* rows, int n_rows, const float* const* xt, int nt, int64_t K, float* y, int64_t ldy,
              int64_t o0, int64_t t0, const float* prefetch) {
  const int64_t k_vec = K / 16 * 16;
  V16 acc[R][T] = {};
  for (int64_t k = 0; k < k_vec; k += 16) {
    if (prefetch != nullptr) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) __builtin_prefetch(prefetch + r * K + k);
    }
    V16 w[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r] = *reinterpret_cast<const V16*>(rows[r] + k);
#pragma GCC unroll 8
    for (int j = 0; j < T; ++j) {
      const V16 xv = *reinterpret_cast<const V16*>(xt[j] + k);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][j] += w[r] * xv;
    }
  }
  for (int r = 0; r < n_rows; ++r) {
    for (int j = 0; j < nt; ++j) {
      float sum = Sum16(acc[r][j]);
      for (int64_t k = k_vec; k < K; ++k) sum += rows[r][k] * xt[j][k];
      y[(t0 + j) * ldy + o0 + r] = sum;
    }
  }
}

// Output rows [begin, end) for 4 to 16 tokens, R rows at a time in groups of
// T tokens: F32 rows are used in place (the next R rows prefetched: four
// interleaved row streams defeat the hardware prefetcher), other types
// dequantized into a per-thread buffer.
template <int R, int T>
void BlockedRange(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, int64_t begin, int64_t end) {
  const int64_t K = w.n_in;
  thread_local std::vector<float> buf;
  const bool f32 = w.type == GgmlType::kF32;
  if (!f32) buf.resize(static_cast<size_t>(R * K));
  for (int64_t o = begin; o < end; o += R) {
    const int n = static_cast<int>(std::min<int64_t>(R, end - o));
    const float* rows[R];
    for (int r = 0; r < R; ++r) {
      const int64_t row = o + std::min(r, n - 1);  // tails repeat a row
      if (f32) {
        rows[r] = reinterpret_cast<const float*>(w.data) + row * K;
      } else {
        if (r < n) DequantizeRowFast(w.type, w.data + row * w.row_bytes(), buf.data() + r * K, K);
        rows[r] = buf.data() + std::min(r, n - 1) * K;
      }
    }
    const float* next = f32 && o + 2 * R <= end ? reinterpret_cast<const float*>(w.data) + (o + R) * K : nullptr;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += T) {
      const int nt = static_cast<int>(std::min<int64_t>(T, n_tokens - t0));
      const float* xt[T];
      for (int j = 0; j < T; ++j) xt[j] = x + (t0 + std::min(j, nt - 1)) * K;
      DotBlock<R, T>(rows, n, xt, nt, K, y, w.n_out, o, t0, t0 == 0 ? next : nullptr);
    }
  }
}

// y[t * ldy + r] = rows[r] . x[t] for t < T, r < n_rows, one row at a time:
// the weights are read as one sequential stream (as in single-token
// decoding, which the hardware prefetcher follows), and the T activation
// rows stay in L1. `prefetch`: the rows stream from memory (not a buffer
// already in cache) and are fetched ahead.
template <int T>
void RowStreamRows(const float* rows, int64_t K, int64_t n_rows, const float* x, float* y, int64_t ldy, bool prefetch) {
  const int64_t k_vec = K / 16 * 16;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* row = rows + r * K;
    V16 acc[T] = {};
    for (int64_t k = 0; k < k_vec; k += 16) {
      // A prefetch past the matrix's end is harmless (it never faults).
      if (prefetch) __builtin_prefetch(row + k + kRowStreamPrefetchFloats);
      const V16 wv = *reinterpret_cast<const V16*>(row + k);
#pragma GCC unroll 16
      for (int j = 0; j < T; ++j) acc[j] += wv * *reinterpret_cast<const V16*>(x + j * K + k);
    }
    for (int j = 0; j < T; ++j) {
      float sum = Sum16(acc[j]);
      for (int64_t k = k_vec; k < K; ++k) sum += row[k] * x[j * K + k];
      y[j * ldy + r] = sum;
    }
  }
}

using RowStreamFn = void (*)(const float*, int64_t, int64_t, const float*, float*, int64_t, bool);
template <int... Ts>
constexpr std::array<RowStreamFn, sizeof...(Ts)> RowStreamTable(std::integer_sequence<int, Ts...>) {
  return {&RowStreamRows<Ts + 1>...};
}
// RowStreamRows<T> for T = 1 .. kGemmMinTokens - 1.
constexpr auto kRowStream = RowStreamTable(std::make_integer_sequence<int, kGemmMinTokens - 1>());

// Output rows [begin, end) in blocks of kRowStreamBlockRows; within a block,
// the tokens in groups of `group`: the first group streams the block's rows
// from memory, the others find them in L2. Other types than F32 are
// dequantized once per block into a per-thread buffer (at most
// kRowStreamBlockRows x 1024 floats: a group of 4 tokens needs n_in <= 1024).
void RowStreamGrouped(const WeightMatrix& w, const float* x, int64_t n_tokens, int64_t group, float* y, int64_t begin,
                      int64_t end) {
  const int64_t K = w.n_in;
  const bool f32 = w.type == GgmlType::kF32;
  thread_local std::vector<float> buf;
  if (!f32) buf.resize(static_cast<size_t>(kRowStreamBlockRows * K));
  for (int64_t o = begin; o < end; o += kRowStreamBlockRows) {
    const int64_t n_rows = std::min(end - o, kRowStreamBlockRows);
    const float* rows = reinterpret_cast<const float*>(w.data) + o * K;
    if (!f32) {
      DequantizeRows(w, o, n_rows, buf.data());
      rows = buf.data();
    }
    for (int64_t t0 = 0; t0 < n_tokens; t0 += group) {
      const int64_t g = std::min(group, n_tokens - t0);
      kRowStream[g - 1](rows, K, n_rows, x + t0 * K, y + t0 * w.n_out + o, w.n_out, f32);
    }
  }
}

}  // namespace

const QuantDotKernel* PackingKernel(GgmlType type, int64_t n_in, int64_t n_out) {
  const QuantDotKernel* k = FindQuantDot(type);
  if (k == nullptr || k->pack_rows <= 0 || k->pack == nullptr || k->packed_dot == nullptr) return nullptr;
  if (n_in % k->block_elems != 0 || n_out < k->pack_rows) return nullptr;
  return k;
}

WeightMatrix PackWeights(const WeightMatrix& w, uint8_t* out, ThreadPool& pool) {
  const QuantDotKernel* k = PackingKernel(w.type, w.n_in, w.n_out);
  if (k == nullptr) {
    std::fprintf(stderr, "PackWeights: no packed layout for %.*s [%lld, %lld]\n",
                 static_cast<int>(TypeName(w.type).size()), TypeName(w.type).data(), static_cast<long long>(w.n_in),
                 static_cast<long long>(w.n_out));
    std::abort();
  }
  const size_t rb = w.row_bytes();
  const int64_t groups = w.n_out / k->pack_rows, packed_rows = groups * k->pack_rows;
  pool.ParallelFor(groups, 16, [&](int64_t begin, int64_t end) {
    const size_t at = static_cast<size_t>(begin * k->pack_rows) * rb;
    k->pack(w.data + at, (end - begin) * k->pack_rows, w.n_in, out + at);
  });
  const size_t tail = static_cast<size_t>(packed_rows) * rb;
  if (tail < w.bytes()) std::memcpy(out + tail, w.data + tail, w.bytes() - tail);
  WeightMatrix packed = w;
  packed.data = out;
  packed.packed = k;
  return packed;
}

void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            MatMulPrecision precision) {
  if (n_tokens <= 0 || w.n_out <= 0) return;
  if (w.packed != nullptr) {
    if (precision != MatMulPrecision::kInt8Activations) {
      std::fprintf(stderr, "MatMul: a packed %.*s matrix needs kInt8Activations\n",
                   static_cast<int>(TypeName(w.type).size()), TypeName(w.type).data());
      std::abort();
    }
    QuantMatMul(*w.packed, w, x, n_tokens, y, pool);
    return;
  }
  if (precision == MatMulPrecision::kInt8Activations) {
    if (const QuantDotKernel* k = FindQuantDot(w.type); k != nullptr && w.n_in % k->block_elems == 0) {
      QuantMatMul(*k, w, x, n_tokens, y, pool);
      return;
    }
  }
  if (n_tokens >= kGemmMinTokens) {
    if (GemmTakes(w.type)) {
      GemmFloatWeights(w, x, n_tokens, y, pool);
      return;
    }
    UseSingleThreadedBlas();
    // Column blocks of at least 64 rows keep each sgemm call efficient.
    pool.ParallelFor(w.n_out, 64, [&](int64_t begin, int64_t end) { GemmRange(w, x, n_tokens, y, begin, end); });
    return;
  }
  if (n_tokens >= kSmallBatchMinTokens) {
    const int64_t x_row_bytes = std::max<int64_t>(w.n_in, 1) * static_cast<int64_t>(sizeof(float));
    const int64_t group = std::min(n_tokens, kRowStreamMaxActivationBytes / x_row_bytes);
    if (group >= kRowStreamMinGroup) {
      pool.ParallelFor(w.n_out, 64,
                       [&](int64_t begin, int64_t end) { RowStreamGrouped(w, x, n_tokens, group, y, begin, end); });
      return;
    }
    pool.ParallelFor(w.n_out, 64, [&](int64_t begin, int64_t end) {
      // 4 x 4 blocks: 8 loads per 16 FMAs, and the 4 rows (at most 64 KiB
      // for n_in 4096) stay in L1/L2 for the next group of tokens.
      BlockedRange<4, 4>(w, x, n_tokens, y, begin, end);
    });
    return;
  }
  if (StreamTakes(w.type)) {
    StreamFloatWeights(w, x, n_tokens, y, pool);
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
