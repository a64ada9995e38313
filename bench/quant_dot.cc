// bench/quant_dot: the K-quant integer dots (q8_K activations) per
// instruction set beside the F32-activation path MatMul takes today, on the
// same random weights in the same run, alternating rounds (medians):
//  - decode: one token through n_out x n_in weights, copies of the matrix
//    cycled so that the bytes read exceed the caches (L3 here is large):
//    weight GB/s, beside MatMul (fused dequantize-and-dot, DotRow) and a
//    plain read loop over 1 GiB;
//  - prompt: P tokens through one matrix: GFLOP/s (2 n_in n_out P / s),
//    beside MatMul (dequantize + sgemm). The portable kernel's prompt runs on
//    an eighth of the rows (its rate per row is the same);
//  - batched decode steps and short prompts: each vector kernel's dot() on
//    the decode copies (from memory, as in a model) for each token count of
//    --tokens (the tokens of every decoding sequence in one step): GFLOP/s
//    and a token's cost against one token alone (1.00 = no gain from
//    sharing the weights), and the weight GB/s of the call. A kernel with
//    a packed layout (QuantDotKernel::pack) runs it too, on copies packed
//    as the loader packs them, alternated with its GGUF rows ("+packed").
//    --table 0 prints this sweep only; --clock cpu times it by this
//    thread's CPU time, on this thread alone.
// Threads split the rows, as MatMul does; the activations are quantized
// once per call on the calling thread (decode) or split by tokens (prompt).
//
//   quant_dot [--threads 1] [--rounds 3] [--n-in 4096] [--n-out 4096]
//             [--prompt 512] [--decode-bytes-mib 768] [--types q4_k,q5_k,q6_k]
//             [--tokens 1,2,4,8,12,16,24,32] [--table 1] [--clock wall|cpu]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "backends/kernels/matmul.h"
#include "backends/kernels/quant_dot.h"
#include "backends/kernels/thread_pool.h"
#include "backends/model/dequant.h"
#include "bench/bench_util.h"

namespace cairn {
namespace {

using bench::Best;
using bench::Rng;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// y = W x through kernel k: quantize on the calling thread, rows split.
void IntegerDecode(const QuantDotKernel& k, const WeightMatrix& w, const float* x, uint8_t* qx, float* y,
                   ThreadPool& pool) {
  k.quantize(x, w.n_in, qx);
  const size_t rb = w.row_bytes();
  pool.ParallelFor(w.n_out, 16, [&](int64_t b, int64_t e) {
    k.dot(w.data + static_cast<size_t>(b) * rb, rb, e - b, qx, 0, 1, w.n_in, y + b, w.n_out);
  });
}

void IntegerPrompt(const QuantDotKernel& k, const WeightMatrix& w, const float* x, int64_t tokens, uint8_t* qx,
                   float* y, ThreadPool& pool) {
  const size_t qs = k.activation_row_bytes(w.n_in);
  pool.ParallelFor(tokens, 8, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) k.quantize(x + t * w.n_in, w.n_in, qx + static_cast<size_t>(t) * qs);
  });
  const size_t rb = w.row_bytes();
  pool.ParallelFor(w.n_out, 16, [&](int64_t b, int64_t e) {
    k.dot(w.data + static_cast<size_t>(b) * rb, rb, e - b, qx, qs, tokens, w.n_in, y + b, w.n_out);
  });
}

// Best-of-3 seconds of fn by the calling thread's CPU time: steadier than
// the wall clock on a shared machine (the sweep then runs on this thread).
template <typename F>
double BestThreadCpu(F&& fn) {
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    timespec a, b;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    fn();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    best = std::min(best, static_cast<double>(b.tv_sec - a.tv_sec) + 1e-9 * static_cast<double>(b.tv_nsec - a.tv_nsec));
  }
  return best;
}

// The token-count sweep of one weight type: every vector kernel's dot() over
// the rows of each of `copies` matrices of `bytes` bytes at `weights` (split
// over threads in groups of 16 rows, as QuantMatMul does; on this thread
// alone with cpu_clock) for each count, alternating the counts within a
// round; the medians per matrix. A kernel with a packed layout
// (QuantDotKernel::pack) also runs on copies packed as the loader packs
// them (PackWeights: packed_dot on the groups, dot on the tail rows),
// alternated with its GGUF rows count by count ("+packed" rows).
void TokenSweep(absl::string_view type_name, GgmlType type, int64_t n_in, int64_t n_out, const uint8_t* weights,
                size_t bytes, size_t copies, const std::vector<int64_t>& counts, int rounds, bool cpu_clock, Rng& rng,
                ThreadPool& pool) {
  const int64_t max_tokens = *std::max_element(counts.begin(), counts.end());
  const std::vector<float> x = rng.SymmetricVec(max_tokens * n_in, 1.0f);
  std::vector<float> y(static_cast<size_t>(n_out * max_tokens)), y_rows(y.size());
  for (const QuantDotKernel* k : QuantDotKernelsFor(type)) {
    if (k->isa == "portable") continue;
    const size_t qs = k->activation_row_bytes(n_in);
    std::vector<uint8_t> qx(qs * static_cast<size_t>(max_tokens));
    for (int64_t t = 0; t < max_tokens; ++t) k->quantize(x.data() + t * n_in, n_in, qx.data() + t * qs);
    const size_t rb = RowBytes(type, n_in);
    const bool packs = PackingKernel(type, n_in, n_out) == k;
    std::vector<uint8_t> packed(packs ? bytes * copies : 0);
    for (size_t c = 0; packs && c < copies; ++c)
      PackWeights(WeightMatrix{type, n_in, n_out, weights + c * bytes}, packed.data() + c * bytes, pool);
    const int64_t packed_end = packs ? n_out / k->pack_rows * k->pack_rows : 0;
    const int n_paths = packs ? 2 : 1;
    std::vector<std::vector<double>> seconds(counts.size() * n_paths);
    bool same_bits = true;
    for (int r = 0; r < rounds; ++r) {
      for (size_t i = 0; i < counts.size(); ++i) {
        for (int path = 0; path < n_paths; ++path) {
          const uint8_t* w = weights;
          // Rows [b, e), b a multiple of 16: packed groups, then GGUF rows.
          auto rows = [&](int64_t b, int64_t e) {
            const int64_t p = path == 1 ? std::clamp(packed_end - b, int64_t{0}, e - b) : 0;
            if (p > 0)
              k->packed_dot(w + static_cast<size_t>(b) * rb, p, qx.data(), qs, counts[i], n_in, y.data() + b, n_out);
            if (p < e - b) {
              k->dot(w + static_cast<size_t>(b + p) * rb, rb, e - b - p, qx.data(), qs, counts[i], n_in,
                     y.data() + b + p, n_out);
            }
          };
          auto all = [&] {
            for (size_t c = 0; c < copies; ++c) {
              w = (path == 1 ? packed.data() : weights) + c * bytes;
              if (cpu_clock) {
                rows(0, n_out);
              } else {
                pool.ParallelFor((n_out + 15) / 16, 1,
                                 [&](int64_t gb, int64_t ge) { rows(gb * 16, std::min(ge * 16, n_out)); });
              }
            }
          };
          seconds[i * n_paths + path].push_back((cpu_clock ? BestThreadCpu(all) : Best(3, all)) /
                                                static_cast<double>(copies));
          // The last copy's products: the packed layout's must have the rows' bits.
          const size_t outputs = static_cast<size_t>(n_out * counts[i]);
          if (path == 0) std::copy(y.begin(), y.begin() + outputs, y_rows.begin());
          if (path == 1) same_bits = same_bits && std::memcmp(y.data(), y_rows.data(), outputs * sizeof(float)) == 0;
        }
      }
    }
    if (!same_bits)
      std::printf("%-5s %-10s: packed_dot differs from dot (a bug)\n", std::string(type_name).c_str(),
                  std::string(k->isa).c_str());
    for (int path = 0; path < n_paths; ++path) {
      const size_t one_at = static_cast<size_t>(std::find(counts.begin(), counts.end(), 1) - counts.begin());
      const double one = Median(seconds[one_at * n_paths + path]);
      const std::string name = std::string(k->isa) + (path == 1 ? "+packed" : "");
      for (size_t i = 0; i < counts.size(); ++i) {
        const double s = Median(seconds[i * n_paths + path]);
        std::printf("%-5s %-12s | %6lld | %9.1f | %8.2f | %10.3f | %8.2f\n", std::string(type_name).c_str(),
                    name.c_str(), static_cast<long long>(counts[i]),
                    2.0 * static_cast<double>(n_in) * static_cast<double>(n_out) * counts[i] / s / 1e9,
                    static_cast<double>(bytes) / s / 1e9, s * 1e3, s / counts[i] / one);
      }
    }
  }
}

// rms(a - b) / rms(b) over n values: the integer path's distance from the
// F32 one (the 8-bit rounding of the activations), a check that the timed
// code computes the product.
double RelRms(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

int Run(int argc, char** argv) {
  int threads = 1, rounds = 3;
  int64_t n_in = 4096, n_out = 4096, prompt = 512, decode_mib = 768;
  std::string types = "q4_k,q5_k,q6_k";
  std::vector<int64_t> counts = {1, 2, 4, 8, 12, 16, 24, 32};
  bool table = true, cpu_clock = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    bool ok = true;
    if (k == "--threads")
      ok = absl::SimpleAtoi(v, &threads) && threads > 0;
    else if (k == "--rounds")
      ok = absl::SimpleAtoi(v, &rounds) && rounds > 0;
    else if (k == "--n-in")
      ok = absl::SimpleAtoi(v, &n_in) && n_in > 0 && n_in % 256 == 0;
    else if (k == "--n-out")
      ok = absl::SimpleAtoi(v, &n_out) && n_out >= 8;
    else if (k == "--prompt")
      ok = absl::SimpleAtoi(v, &prompt) && prompt > 0;
    else if (k == "--decode-bytes-mib")
      ok = absl::SimpleAtoi(v, &decode_mib) && decode_mib > 0;
    else if (k == "--types")
      types = v;
    else if (k == "--clock") {
      ok = v == "cpu" || v == "wall";
      cpu_clock = v == "cpu";
    } else if (k == "--table") {
      ok = v == "0" || v == "1";
      table = v == "1";
    } else if (k == "--tokens") {
      counts.clear();
      for (absl::string_view c : absl::StrSplit(v, ',')) {
        int64_t t = 0;
        ok = ok && absl::SimpleAtoi(c, &t) && t > 0;
        counts.push_back(t);
      }
      // The sweep's costs are relative to one token: measured whether or
      // not the list names it.
      if (ok && std::find(counts.begin(), counts.end(), 1) == counts.end()) counts.insert(counts.begin(), 1);
    } else
      ok = false;
    if (!ok) {
      std::fprintf(stderr, "bad flag %s %s\n", k.c_str(), v.c_str());
      return 2;
    }
  }
  ThreadPool pool(threads);
  const double read_bw = bench::ReadBandwidth1GiB(pool, 3);
  std::printf(
      "weights %lld x %lld (n_out x n_in); %d threads; %d alternating rounds, medians; "
      "read loop over 1 GiB: %.1f GB/s\n",
      static_cast<long long>(n_out), static_cast<long long>(n_in), threads, rounds, read_bw / 1e9);
  if (table) {
    std::printf(
        "decode: weight GB/s (ratio to MatMul's F32-activation path); prompt of %lld tokens: GFLOP/s "
        "(ratio to MatMul's dequantize + sgemm)\n\n",
        static_cast<long long>(prompt));
    std::printf("%-5s %-10s | %9s %7s %8s | %9s %7s | %s\n", "type", "path", "dec GB/s", "ratio", "rel.rms", "GFLOP/s",
                "ratio", "");
  }
  Rng rng;
  struct Swept {
    std::string name;
    GgmlType type;
    std::vector<uint8_t> weights;
  };
  std::vector<Swept> swept;
  for (absl::string_view name : absl::StrSplit(types, ',')) {
    GgmlType type;
    if (name == "q4_k")
      type = GgmlType::kQ4_K;
    else if (name == "q5_k")
      type = GgmlType::kQ5_K;
    else if (name == "q6_k")
      type = GgmlType::kQ6_K;
    else {
      std::fprintf(stderr, "unknown type %s (q4_k, q5_k, q6_k)\n", std::string(name).c_str());
      return 2;
    }
    const std::vector<uint8_t> one = bench::RandomWeights(type, n_in, n_out, rng);
    const size_t copies = std::max<size_t>(1, static_cast<size_t>(decode_mib << 20) / one.size());
    swept.push_back(Swept{std::string(name), type, one});
    if (!table) continue;
    std::vector<uint8_t> all(one.size() * copies);
    for (size_t c = 0; c < copies; ++c) std::memcpy(all.data() + c * one.size(), one.data(), one.size());
    auto matrix = [&](size_t c) { return WeightMatrix{type, n_in, n_out, all.data() + c * one.size()}; };
    const std::vector<float> x = rng.SymmetricVec(prompt * n_in, 1.0f);

    struct Path {
      std::string name;
      const QuantDotKernel* k = nullptr;  // null: MatMul
      std::vector<double> dec_gbs, dec_ratio, pr_gflops, pr_ratio;
      double rel_rms = 0;
    };
    std::vector<Path> paths(1);
    paths[0].name = "MatMul f32";
    for (const QuantDotKernel* k : QuantDotKernelsFor(type))
      paths.push_back(Path{std::string(k->isa), k, {}, {}, {}, {}, 0});
    std::vector<uint8_t> qx(paths.back().k->activation_row_bytes(n_in) * static_cast<size_t>(prompt));
    std::vector<float> y(static_cast<size_t>(n_out * prompt)), y_ref(static_cast<size_t>(n_out));
    MatMul(matrix(0), x.data(), 1, y_ref.data(), pool, MatMulPrecision::kExact);
    for (Path& p : paths) {
      if (p.k == nullptr) continue;
      IntegerDecode(*p.k, matrix(0), x.data(), qx.data(), y.data(), pool);
      p.rel_rms = RelRms(y.data(), y_ref.data(), n_out);
    }
    const double total_bytes = static_cast<double>(all.size());
    for (int r = 0; r < rounds; ++r) {
      double base_dec = 0, base_pr = 0;
      for (Path& p : paths) {
        const double dec = Best(2, [&] {
          for (size_t c = 0; c < copies; ++c) {
            if (p.k == nullptr)
              MatMul(matrix(c), x.data(), 1, y.data(), pool, MatMulPrecision::kExact);
            else
              IntegerDecode(*p.k, matrix(c), x.data(), qx.data(), y.data(), pool);
          }
        });
        // The portable prompt on an eighth of the rows: same rate per row.
        WeightMatrix w = matrix(0);
        if (p.name == "portable") w.n_out = std::max<int64_t>(8, n_out / 8);
        const double pr = Best(2, [&] {
          if (p.k == nullptr)
            MatMul(w, x.data(), prompt, y.data(), pool, MatMulPrecision::kExact);
          else
            IntegerPrompt(*p.k, w, x.data(), prompt, qx.data(), y.data(), pool);
        });
        const double gbs = total_bytes / dec / 1e9;
        const double gflops = 2.0 * static_cast<double>(n_in) * static_cast<double>(w.n_out) * prompt / pr / 1e9;
        if (p.k == nullptr) {
          base_dec = gbs;
          base_pr = gflops;
        }
        p.dec_gbs.push_back(gbs);
        p.dec_ratio.push_back(gbs / base_dec);
        p.pr_gflops.push_back(gflops);
        p.pr_ratio.push_back(gflops / base_pr);
      }
    }
    for (const Path& p : paths) {
      std::printf("%-5s %-10s | %9.2f %7.2f %8.4f | %9.1f %7.2f |\n", std::string(name).c_str(), p.name.c_str(),
                  Median(p.dec_gbs), Median(p.dec_ratio), p.rel_rms, Median(p.pr_gflops), Median(p.pr_ratio));
    }
  }
  std::printf(
      "\nbatched steps: dot() over %lld x %lld matrices cycled over %lld MiB, medians of %d alternating rounds, %s; "
      "cost/token = time per token / time of one token alone\n",
      static_cast<long long>(n_out), static_cast<long long>(n_in), static_cast<long long>(decode_mib), rounds,
      cpu_clock ? "CPU time of one thread" : "wall clock");
  std::printf("%-5s %-12s | %6s | %9s | %8s | %10s | %8s\n", "type", "path", "tokens", "GFLOP/s", "W GB/s", "ms",
              "cost/tok");
  for (const Swept& s : swept) {
    // Copies cycled as for decode (the weights stream from memory, as in a
    // model's decode step), one matrix's worth with --decode-bytes-mib small.
    const size_t copies = std::max<size_t>(1, static_cast<size_t>(decode_mib << 20) / s.weights.size());
    std::vector<uint8_t> all(s.weights.size() * copies);
    for (size_t c = 0; c < copies; ++c)
      std::memcpy(all.data() + c * s.weights.size(), s.weights.data(), s.weights.size());
    TokenSweep(s.name, s.type, n_in, n_out, all.data(), s.weights.size(), copies, counts, rounds, cpu_clock, rng, pool);
  }
  return 0;
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) { return cairn::Run(argc, argv); }
