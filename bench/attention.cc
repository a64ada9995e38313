// bench/attention: the attention kernel (backends/kernels/attention.h) on
// bench-llama's heads (16 query heads, 8 KV heads of 128) and Qwen3.5's (8
// query heads, 2 KV heads of 256), beside cblas_sgemm / cblas_sgemv on the
// same products measured in the same run, alternating rep by rep:
//  - prompt (P tokens, causal): GFLOP/s counting only the products the causal
//    mask keeps, beside sgemm over the full P x P products (the pool
//    splitting heads between single-threaded calls); the sgemm baseline does
//    twice the work, so /sgemm near 0.5 means the same time;
//  - a chunk (128 queries at the end of P keys, a follow-up turn's prompt)
//    and decode (1 query at P keys, with sgemv): the same.
// Each row also prints a fingerprint of the output bits: a change of the
// kernel that must keep every bit (attention.h's invariance) keeps it.
//
// --cpu-time 1: time by the process's CPU time instead of the wall clock (a
// shared machine's time slices do not count; meant for --threads 1).
//
//   attention [--threads 1] [--reps 5] [--cpu-time 0|1] [--prompts 512,2048]
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "backends/kernels/attention.h"
#include "backends/kernels/thread_pool.h"
#include "bench/bench_util.h"

namespace cairn {
namespace {

bool cpu_time = false;

// Seconds fn takes: the process's CPU time with --cpu-time 1 (std::clock,
// microseconds on glibc), else the wall clock.
template <typename F>
double Timed(F&& fn) {
  if (cpu_time) {
    const std::clock_t c0 = std::clock();
    fn();
    return static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  }
  const bench::Clock::time_point t0 = bench::Clock::now();
  fn();
  return bench::Since(t0);
}

// A follow-up turn's prompt: this many queries at the end of a longer run.
constexpr int64_t kChunk = 128;

struct Heads {
  const char* name;
  int32_t n_head, n_head_kv, head_dim;
};
constexpr Heads kHeads[] = {{"llama 16/8x128", 16, 8, 128}, {"qwen35 8/2x256", 8, 2, 256}};

// FNV-1a over the bytes of out: equal bits, equal fingerprint.
uint64_t Fingerprint(const std::vector<float>& out) {
  uint64_t h = 1469598103934665603ull;
  const auto* b = reinterpret_cast<const unsigned char*>(out.data());
  for (size_t i = 0; i < out.size() * sizeof(float); ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

// One geometry: n_q queries (the last n_q positions of n_kv, causal) over
// n_kv keys, random q, k, v.
struct Problem {
  Problem(const Heads& h, int64_t n_q_in, int64_t n_kv_in, bench::Rng& rng) : heads(h), n_q(n_q_in), n_kv(n_kv_in) {
    const int64_t q_width = int64_t{h.n_head} * h.head_dim, kv_width = int64_t{h.n_head_kv} * h.head_dim;
    q.resize(static_cast<size_t>(n_q * q_width));
    k.resize(static_cast<size_t>(n_kv * kv_width));
    v.resize(k.size());
    out.resize(q.size());
    for (float& x : q) x = rng.Symmetric(1.0f);
    for (float& x : k) x = rng.Symmetric(1.0f);
    for (float& x : v) x = rng.Symmetric(1.0f);
    for (int64_t i = 0; i < n_q; ++i) kv_end.push_back(static_cast<int32_t>(n_kv - n_q + i + 1));
    params.n_head = h.n_head;
    params.n_head_kv = h.n_head_kv;
    params.head_dim_k = params.head_dim_v = h.head_dim;
    params.scale = 1.0f / 16.0f;
    args.q = q.data();
    args.q_stride = q_width;
    args.n_q = n_q;
    args.kv_end = kv_end.data();
    args.k = k.data();
    args.k_stride = kv_width;
    args.v = v.data();
    args.v_stride = kv_width;
    args.n_kv = n_kv;
    args.out = out.data();
    args.out_stride = q_width;
  }
  // Multiply-adds the causal mask keeps, times 2.
  double Flop() const {
    double rows = 0;
    for (int32_t e : kv_end) rows += e;
    return 2.0 * rows * heads.n_head * (2.0 * heads.head_dim);
  }
  Heads heads;
  int64_t n_q, n_kv;
  std::vector<float> q, k, v, out;
  std::vector<int32_t> kv_end;
  AttentionParams params;
  AttentionArgs args;
};

// The same products by BLAS, without mask or softmax: per head, scores =
// q k^T over every key, then out = scores v; heads split over the pool.
double BlasSeconds(Problem& p, ThreadPool& pool, std::vector<float>& scores) {
  const Heads& h = p.heads;
  const int group = h.n_head / h.n_head_kv, d = h.head_dim;
  const int nq = static_cast<int>(p.n_q), nkv = static_cast<int>(p.n_kv);
  scores.resize(static_cast<size_t>(h.n_head) * static_cast<size_t>(nq) * static_cast<size_t>(nkv));
  return Timed([&] {
    pool.ParallelFor(h.n_head, 1, [&](int64_t b, int64_t e) {
      for (int64_t hh = b; hh < e; ++hh) {
        const float* q = p.q.data() + hh * d;
        const float* k = p.k.data() + (hh / group) * d;
        const float* v = p.v.data() + (hh / group) * d;
        float* s = scores.data() + hh * nq * nkv;
        float* o = p.out.data() + hh * d;
        if (nq == 1) {
          cblas_sgemv(CblasRowMajor, CblasNoTrans, nkv, d, 1.0f, k, static_cast<int>(p.args.k_stride), q, 1, 0.0f, s,
                      1);
          cblas_sgemv(CblasRowMajor, CblasTrans, nkv, d, 1.0f, v, static_cast<int>(p.args.v_stride), s, 1, 0.0f, o, 1);
          continue;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nkv, d, 1.0f, q, static_cast<int>(p.args.q_stride), k,
                    static_cast<int>(p.args.k_stride), 0.0f, s, nkv);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nq, d, nkv, 1.0f, s, nkv, v,
                    static_cast<int>(p.args.v_stride), 0.0f, o, static_cast<int>(p.args.out_stride));
      }
    });
  });
}

std::string RunName(int64_t n_q, int64_t n_kv) {
  if (n_q == 1) return "decode @" + std::to_string(n_kv);
  if (n_q == n_kv) return "prompt " + std::to_string(n_kv);
  return "chunk " + std::to_string(n_q) + " @" + std::to_string(n_kv);
}

void Row(const Heads& h, int64_t n_q, int64_t n_kv, int reps, ThreadPool& pool) {
  // Inputs seeded by the geometry alone: a row's fingerprint does not depend
  // on which rows ran before it.
  bench::Rng rng(static_cast<uint64_t>(h.head_dim) << 40 | static_cast<uint64_t>(n_q) << 20 |
                 static_cast<uint64_t>(n_kv));
  Problem p(h, n_q, n_kv, rng);
  std::vector<float> scores;
  double t_ours = 1e30, t_blas = 1e30;
  uint64_t print = 0;
  for (int r = 0; r < reps; ++r) {
    t_ours = std::min(t_ours, Timed([&] { Attention(p.params, p.args, pool); }));
    print = Fingerprint(p.out);
    t_blas = std::min(t_blas, BlasSeconds(p, pool, scores));
  }
  const double blas_flop = 4.0 * static_cast<double>(n_q) * static_cast<double>(n_kv) * h.n_head * h.head_dim;
  std::printf("%-15s %-16s | %9.3f %8.1f | %8.1f %7.2f | %016llx\n", h.name, RunName(n_q, n_kv).c_str(), 1e3 * t_ours,
              p.Flop() / t_ours / 1e9, blas_flop / t_blas / 1e9, (p.Flop() / t_ours) / (blas_flop / t_blas),
              static_cast<unsigned long long>(print));
  std::fflush(stdout);
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) {
  using namespace cairn;
  int threads = 1, reps = 5;
  std::vector<int64_t> prompts = {512, 2048};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--threads") {
      threads = std::atoi(argv[i + 1]);
    } else if (k == "--reps") {
      reps = std::atoi(argv[i + 1]);
    } else if (k == "--cpu-time") {
      cpu_time = std::atoi(argv[i + 1]) != 0;
    } else if (k == "--prompts") {
      prompts.clear();
      for (const char* s = argv[i + 1];;) {
        char* next = nullptr;
        prompts.push_back(std::strtoll(s, &next, 10));
        if (*next != ',') break;
        s = next + 1;
      }
    } else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  openblas_set_num_threads(1);
  ThreadPool pool(threads);
  std::printf("%d threads, best of %d; ms and GFLOP/s of the causal products; BLAS over the full products\n", threads,
              reps);
  std::printf("%-15s %-16s | %9s %8s | %8s %7s | %s\n", "heads", "run", "ms", "GFLOP/s", "BLAS", "/BLAS",
              "output bits");
  for (const Heads& h : kHeads) {
    for (int64_t n : prompts) {
      Row(h, n, n, reps, pool);
      Row(h, 1, n, reps, pool);
      if (n > kChunk) Row(h, kChunk, n, reps, pool);
    }
  }
  return 0;
}
