// bench/matmul: MatMul on the products of one bench-llama layer (n_embd
// 2048, ffn 5632, 8 KV heads of 128), F32 and F16 weights, against baselines
// measured in the same run, alternating rep by rep so both see the same load:
//  - prompt (P tokens): GFLOP/s of MatMul beside cblas_sgemm with OpenBLAS's
//    own threads (same count) and beside the pool splitting the output rows
//    between single-threaded sgemm calls (MatMul's path before its own GEMM);
//  - decode (1 token): GB/s of weights read beside a plain read loop over a
//    buffer of the same size on the same pool;
//  - the pool: microseconds per empty ParallelFor (what each of a decode
//    token's ~60 products pays before any work).
//
// --cpu-time: time by the process's CPU time instead of the wall clock: on a
// shared machine, with --threads 1, this compares the kernels' own cost
// without the time slices other processes take (spinning threads would
// count, so it is meant for one thread).
//
//   matmul [--threads 2] [--tokens 512] [--reps 5] [--cpu-time 0|1]
#include <cblas.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/kernels/matmul.h"
#include "backends/kernels/thread_pool.h"
#include "backends/model/dequant.h"
#include "bench/bench_util.h"

namespace cairn {
namespace {

using bench::Rng;

bool cpu_time = false;

double Now() {
  timespec ts;
  clock_gettime(cpu_time ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

template <typename F>
double Best(int reps, F&& fn) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const double t0 = Now();
    fn();
    best = std::min(best, Now() - t0);
  }
  return best;
}

struct Shape {
  const char* name;
  int64_t n_in, n_out;
};
constexpr Shape kShapes[] = {{"attn_q/o 2048x2048", 2048, 2048},
                             {"attn_k/v 2048x1024", 2048, 1024},
                             {"ffn_up/gate 2048x5632", 2048, 5632},
                             {"ffn_down 5632x2048", 5632, 2048}};

std::vector<uint8_t> Weights(GgmlType type, int64_t n_in, int64_t n_out, Rng& rng) {
  std::vector<uint8_t> bytes(RowBytes(type, n_in) * static_cast<size_t>(n_out));
  for (int64_t i = 0; i < n_in * n_out; ++i) {
    const float v = rng.Symmetric(0.02f);
    if (type == GgmlType::kF32) {
      std::memcpy(&bytes[static_cast<size_t>(i) * 4], &v, 4);
    } else {
      const uint16_t h = Fp32ToFp16(v);
      std::memcpy(&bytes[static_cast<size_t>(i) * 2], &h, 2);
    }
  }
  return bytes;
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) {
  using namespace cairn;
  int threads = 2, reps = 5;
  int64_t tokens = 512;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (k == "--tokens")
      tokens = std::atoll(argv[i + 1]);
    else if (k == "--reps")
      reps = std::atoi(argv[i + 1]);
    else if (k == "--cpu-time")
      cpu_time = std::atoi(argv[i + 1]) != 0;
    else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  ThreadPool pool(threads);
  Rng rng;

  // The pool's dispatch: an empty body, so only the wake-up and the join.
  {
    const int n = 20000;
    volatile int64_t sink = 0;
    const double s = Best(reps, [&] {
      for (int i = 0; i < n; ++i) pool.ParallelFor(threads, 1, [&](int64_t b, int64_t) { sink = sink + b; });
    });
    std::printf("pool: %.2f us per empty ParallelFor over %d threads (the caller may run every chunk)\n", 1e6 * s / n,
                threads);
  }
  // The hand-off: each chunk waits until every chunk has started, so every
  // thread must take one: the latency for spinning workers to join a job.
  if (threads >= 2) {
    const int n = 20000;
    const double s = Best(reps, [&] {
      for (int i = 0; i < n; ++i) {
        std::atomic<int> started{0};
        pool.ParallelFor(threads, 1, [&](int64_t, int64_t) {
          started.fetch_add(1);
          for (int spin = 0; started.load() < threads && spin < (1 << 24); ++spin) {
          }
        });
      }
    });
    std::printf("pool: %.2f us per ParallelFor that every thread must join\n", 1e6 * s / n);
  }
  std::printf("\n");

  std::printf("%d threads, prompt %lld tokens; GFLOP/s (prompt), GB/s of weights (decode)\n", threads,
              static_cast<long long>(tokens));
  std::printf("%-4s %-22s | %8s %8s %8s %7s %7s | %8s %8s %6s\n", "type", "shape", "MatMul", "sgemm", "split", "/sgemm",
              "/split", "decode", "read", "/read");
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16}) {
    for (const Shape& s : kShapes) {
      const std::vector<uint8_t> wb = Weights(type, s.n_in, s.n_out, rng);
      const WeightMatrix w{type, s.n_in, s.n_out, wb.data()};
      std::vector<float> x(static_cast<size_t>(tokens * s.n_in)), y(static_cast<size_t>(tokens * s.n_out));
      for (float& v : x) v = rng.Symmetric(1.0f);
      // The baselines take F32 weights: F16 ones are widened first (untimed).
      std::vector<float> wf(static_cast<size_t>(s.n_in * s.n_out));
      for (int64_t o = 0; o < s.n_out; ++o) {
        DequantizeRow(type, wb.data() + o * w.row_bytes(), wf.data() + o * s.n_in, s.n_in);
      }
      const int M = static_cast<int>(tokens), N = static_cast<int>(s.n_out), K = static_cast<int>(s.n_in);
      double t_ours = 1e30, t_sgemm = 1e30, t_split = 1e30, t_dec = 1e30, t_read = 1e30;
      std::vector<float> y1(static_cast<size_t>(s.n_out));
      volatile float sink = 0;
      for (int r = 0; r < reps; ++r) {
        t_ours =
            std::min(t_ours, Best(1, [&] { MatMul(w, x.data(), tokens, y.data(), pool, MatMulPrecision::kExact); }));
        openblas_set_num_threads(threads);
        t_sgemm = std::min(t_sgemm, Best(1, [&] {
                             cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x.data(), K, wf.data(),
                                         K, 0.0f, y.data(), N);
                           }));
        openblas_set_num_threads(1);
        t_split = std::min(t_split, Best(1, [&] {
                             pool.ParallelFor(s.n_out, 64, [&](int64_t b, int64_t e) {
                               cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, static_cast<int>(e - b), K, 1.0f,
                                           x.data(), K, wf.data() + b * K, K, 0.0f, y.data() + b, N);
                             });
                           }));
        t_dec = std::min(t_dec, Best(1, [&] { MatMul(w, x.data(), 1, y1.data(), pool, MatMulPrecision::kExact); }));
        t_read = std::min(t_read, Best(1, [&] {
                            pool.ParallelFor(static_cast<int64_t>(wb.size() / 4), 1 << 14, [&](int64_t b, int64_t e) {
                              const float* f = reinterpret_cast<const float*>(wb.data());
                              float acc[16] = {};
                              for (int64_t i = b; i + 16 <= e; i += 16) {
                                for (int j = 0; j < 16; ++j) acc[j] += f[i + j];
                              }
                              float t = 0;
                              for (float a : acc) t += a;
                              sink = sink + t;
                            });
                          }));
      }
      const double flop = 2.0 * static_cast<double>(tokens) * static_cast<double>(s.n_in * s.n_out);
      const double bytes = static_cast<double>(wb.size());
      std::printf("%-4s %-22s | %8.1f %8.1f %8.1f %7.2f %7.2f | %8.1f %8.1f %6.2f\n", TypeName(type).data(), s.name,
                  flop / t_ours / 1e9, flop / t_sgemm / 1e9, flop / t_split / 1e9, t_sgemm / t_ours, t_split / t_ours,
                  bytes / t_dec / 1e9, bytes / t_read / 1e9, t_read / t_dec);
      std::fflush(stdout);
    }
  }
  return 0;
}
