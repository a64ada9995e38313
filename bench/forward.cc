// bench/forward: prompt and decode speed of the transformer family on
// synthetic llama models built in memory, each beside a roofline measured in
// the same run on the same machine:
//  - prompt: tokens/s of one Forward over a P-token prompt, against
//    cblas_sgemm (OpenBLAS's own threads, same thread count) on exactly the
//    products the prompt needs (the model's matrices times P rows);
//  - decode: weight bytes read per token / time per token, against the
//    bandwidth of a plain copy loop (bytes read + written) and of a plain
//    read loop, both with the same threads over a buffer larger than caches.
//
//   forward [--threads 2] [--layers 8] [--embd 2048] [--ff 5632] [--heads 16]
//           [--kv-heads 8] [--vocab 32000] [--prompt 512] [--decode 16]
//           [--types f32,q8_0,q4_k] [--activations default,exact]
//
// --activations: each type runs on the backend's default path (8-bit
// activations where the weight type has an integer kernel), on the exact
// path (BackendOptions::exact_activations; rows marked "/x"), or both.
//
// With --model, a GGUF file (any family) measured as llama-bench measures it
// instead (bench/file_speed.h):
//   forward --model PATH.gguf|NAME [--threads 2] [--prompt 512] [--decode 32]
//           [--rounds 3] [--batch 1] [--exact-activations | --vs-exact | --vs-rows | --no-pack-weights]
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "backends/backend.h"
#include "backends/kernels/thread_pool.h"
#include "backends/model/gguf.h"
#include "backends/transformer/transformer.h"
#include "bench/bench_util.h"
#include "bench/file_speed.h"
#include "synthetic/architectures.h"

namespace cairn {
namespace {

using bench::Clock;
using bench::Rng;
using bench::Seconds;

// The (n_in, n_out) products of one prompt step, with multiplicity.
std::vector<std::pair<int64_t, int64_t>> Products(const synthetic::LlamaShape& s) {
  const int64_t kv = s.n_embd / s.n_head * s.n_head_kv;
  return {{s.n_embd, s.n_embd}, {s.n_embd, kv},     {s.n_embd, kv},    {s.n_embd, s.n_embd},
          {s.n_embd, s.n_ff},   {s.n_embd, s.n_ff}, {s.n_ff, s.n_embd}};
}

// Seconds cblas_sgemm (OpenBLAS threads = n_threads) needs for all products
// of a `rows`-token prompt: every layer's matrices. The output head is left
// out (the backend applies it to the last row only: 1/rows of a layer's work),
// which makes the reference slightly faster than the prompt can be.
double SgemmSeconds(const synthetic::LlamaShape& s, int64_t rows, int n_threads) {
  openblas_set_num_threads(n_threads);
  double total = 0;
  std::map<std::pair<int64_t, int64_t>, double> cache;
  for (auto shape : Products(s)) {
    auto it = cache.find(shape);
    if (it == cache.end()) {
      const int64_t K = shape.first, N = shape.second;
      std::vector<float> a(rows * K, 0.01f), b(N * K, 0.02f), c(rows * N);
      double best = 1e30;
      for (int rep = 0; rep < 3; ++rep) {
        auto t0 = Clock::now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(N),
                    static_cast<int>(K), 1.0f, a.data(), static_cast<int>(K), b.data(), static_cast<int>(K), 0.0f,
                    c.data(), static_cast<int>(N));
        best = std::min(best, Seconds(t0, Clock::now()));
      }
      it = cache.emplace(shape, best).first;
    }
    total += it->second;
  }
  openblas_set_num_threads(1);
  return total * s.n_layer;
}

// Copy loop (bytes read + written) and read loop over a buffer well beyond
// the caches, with the same threads. One Rep() measures each once; the bench
// interleaves reps with the measured work so both see the same machine load.
class BandwidthProbe {
 public:
  BandwidthProbe(size_t bytes, int n_threads)
      : n_(bytes / sizeof(float)), src_(n_, 1.0f), dst_(n_, 0.0f), pool_(n_threads) {}
  void Rep() {
    auto t0 = Clock::now();
    pool_.ParallelFor(static_cast<int64_t>(n_), 1 << 16, [&](int64_t b, int64_t e) {
      std::memcpy(dst_.data() + b, src_.data() + b, static_cast<size_t>(e - b) * sizeof(float));
    });
    best_copy_ = std::min(best_copy_, Seconds(t0, Clock::now()));
    t0 = Clock::now();
    pool_.ParallelFor(static_cast<int64_t>(n_), 1 << 16, [&](int64_t b, int64_t e) {
      float acc[16] = {};
      for (int64_t i = b; i + 16 <= e; i += 16)
        for (int k = 0; k < 16; ++k) acc[k] += src_[i + k];
      float t = 0;
      for (float x : acc) t += x;
      sink_ += t;  // keeps the read loop alive
    });
    best_read_ = std::min(best_read_, Seconds(t0, Clock::now()));
  }
  double copy_bw() const { return 2.0 * static_cast<double>(n_ * sizeof(float)) / best_copy_; }
  double read_bw() const { return static_cast<double>(n_ * sizeof(float)) / best_read_; }
  double sink() const { return sink_; }

 private:
  size_t n_;
  std::vector<float> src_, dst_;
  ThreadPool pool_;
  double best_copy_ = 1e30, best_read_ = 1e30;
  std::atomic<double> sink_{0};
};

struct Result {
  std::string type;
  double weight_gib = 0;
  double prompt_tps = 0, sgemm_tps = 0;
  double decode_tps = 0, decode_gbs = 0;
  double copy_bw = 0, read_bw = 0;
};

Result RunOne(const synthetic::LlamaShape& s, GgmlType type, bool exact, int threads, int64_t prompt, int decode) {
  Result r;
  r.type = std::string(TypeName(type)) + (exact ? "/x" : "");
  synthetic::SyntheticModel synthetic_model = synthetic::Llama(s);
  synthetic_model.weight_type = type;
  std::shared_ptr<const ModelFile> model = bench::ModelOrDie(synthetic_model, "bench-llama");
  BackendOptions opt;
  opt.n_threads = threads;
  opt.exact_activations = exact;
  auto backend = TransformerFamily().create(std::move(model), opt);
  if (!backend.ok()) {
    std::fprintf(stderr, "backend: %s\n", backend.status().ToString().c_str());
    return r;
  }
  Backend& b = **backend;
  r.weight_gib = static_cast<double>(b.info().weight_bytes) / (1 << 30);
  Rng rng;
  std::vector<TokenId> tokens(prompt + decode);
  for (auto& t : tokens) t = static_cast<TokenId>(rng.Next() % static_cast<uint64_t>(s.n_vocab));

  // Prompt: best of three fresh sequences, each followed by the sgemm
  // reference, so both see the same machine load.
  double best_prompt = 1e30, best_sgemm = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    auto mem = b.NewSequence();
    const int32_t last = static_cast<int32_t>(prompt - 1);
    SequenceRun run{
        mem->get(), 0, std::span<const TokenId>(tokens).subspan(0, prompt), nullptr, std::span<const int32_t>(&last, 1),
        {}};
    auto t0 = Clock::now();
    auto out = b.Forward(std::span<const SequenceRun>(&run, 1));
    best_prompt = std::min(best_prompt, Seconds(t0, Clock::now()));
    if (!out.ok()) std::fprintf(stderr, "prompt: %s\n", out.status().ToString().c_str());
    best_sgemm = std::min(best_sgemm, SgemmSeconds(s, prompt, threads));
  }
  r.prompt_tps = static_cast<double>(prompt) / best_prompt;
  r.sgemm_tps = static_cast<double>(prompt) / best_sgemm;

  // Decode: one token per Forward after a short prompt (attention stays
  // small); rounds of 4 tokens alternate with copy/read-loop reps. Best
  // token time against best loop time.
  BandwidthProbe probe(size_t{1} << 29, threads);
  auto mem = b.NewSequence();
  const int32_t row0 = 0;
  double best_token = 1e30;
  for (int i = 0; i < decode + 2; ++i) {
    SequenceRun run{
        mem->get(), i, std::span<const TokenId>(tokens).subspan(i, 1), nullptr, std::span<const int32_t>(&row0, 1), {}};
    auto t0 = Clock::now();
    auto out = b.Forward(std::span<const SequenceRun>(&run, 1));
    if (i >= 2) best_token = std::min(best_token, Seconds(t0, Clock::now()));  // 2 warm-up tokens
    if (!out.ok()) std::fprintf(stderr, "decode: %s\n", out.status().ToString().c_str());
    if (i % 4 == 3) probe.Rep();
  }
  probe.Rep();
  r.decode_tps = 1.0 / best_token;
  r.decode_gbs = static_cast<double>(b.info().weight_bytes) / best_token / 1e9;
  r.copy_bw = probe.copy_bw();
  r.read_bw = probe.read_bw();
  if (probe.sink() == -1.0) std::printf("\n");
  return r;
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) {
  using namespace cairn;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--model") return bench::FileSpeedMain(argc, argv, "forward");
  }
  // bench-llama's shape (BENCHMARKS.md) unless the flags say otherwise.
  synthetic::LlamaShape s{.n_embd = 2048,
                          .n_ff = 5632,
                          .n_vocab = 32000,
                          .n_layer = 8,
                          .n_head = 16,
                          .n_head_kv = 8,
                          .rope_base = 500000.0f};
  int threads = 2;
  int64_t prompt = 512;
  int decode = 16;
  std::string types = "f32,q8_0,q4_k";
  std::string activations = "default";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    bool ok = true;
    if (k == "--threads")
      ok = absl::SimpleAtoi(v, &threads);
    else if (k == "--layers")
      ok = absl::SimpleAtoi(v, &s.n_layer);
    else if (k == "--embd")
      ok = absl::SimpleAtoi(v, &s.n_embd);
    else if (k == "--ff")
      ok = absl::SimpleAtoi(v, &s.n_ff);
    else if (k == "--heads")
      ok = absl::SimpleAtoi(v, &s.n_head);
    else if (k == "--kv-heads")
      ok = absl::SimpleAtoi(v, &s.n_head_kv);
    else if (k == "--vocab")
      ok = absl::SimpleAtoi(v, &s.n_vocab);
    else if (k == "--prompt")
      ok = absl::SimpleAtoi(v, &prompt);
    else if (k == "--decode")
      ok = absl::SimpleAtoi(v, &decode);
    else if (k == "--types")
      types = v;
    else if (k == "--activations")
      activations = v;
    else
      ok = false;
    if (!ok) {
      std::fprintf(stderr, "bad flag %s %s\n", k.c_str(), v.c_str());
      return 2;
    }
  }
  std::printf(
      "synthetic llama: n_embd %lld, %d layers, %d/%d heads, ffn %lld, vocab %lld; %d threads; "
      "prompt %lld tokens, decode %d tokens\n",
      static_cast<long long>(s.n_embd), s.n_layer, s.n_head, s.n_head_kv, static_cast<long long>(s.n_ff),
      static_cast<long long>(s.n_vocab), threads, static_cast<long long>(prompt), decode);
  std::printf(
      "rooflines measured beside each row: cblas_sgemm (OpenBLAS threads) on the prompt's products; "
      "copy loop (read+write bytes) and read loop over 512 MiB\n\n");
  std::printf("%-6s %9s | %11s %10s %7s | %10s %8s %8s %6s %8s %6s\n", "type", "weights", "prompt t/s", "sgemm t/s",
              "%sgemm", "decode t/s", "GB/s", "copy GB/s", "%copy", "read GB/s", "%read");
  for (absl::string_view t : absl::StrSplit(types, ',')) {
    GgmlType type;
    if (t == "f32")
      type = GgmlType::kF32;
    else if (t == "f16")
      type = GgmlType::kF16;
    else if (t == "q8_0")
      type = GgmlType::kQ8_0;
    else if (t == "q4_0")
      type = GgmlType::kQ4_0;
    else if (t == "q4_k")
      type = GgmlType::kQ4_K;
    else if (t == "q5_k")
      type = GgmlType::kQ5_K;
    else if (t == "q6_k")
      type = GgmlType::kQ6_K;
    else {
      std::fprintf(stderr, "unknown type %s\n", std::string(t).c_str());
      return 2;
    }
    for (absl::string_view a : absl::StrSplit(activations, ',')) {
      if (a != "default" && a != "exact") {
        std::fprintf(stderr, "unknown --activations %s (default or exact)\n", std::string(a).c_str());
        return 2;
      }
      Result r = RunOne(s, type, a == "exact", threads, prompt, decode);
      std::printf("%-6s %7.2f G | %11.1f %10.1f %6.0f%% | %10.2f %8.1f %9.1f %5.0f%% %9.1f %5.0f%%\n", r.type.c_str(),
                  r.weight_gib, r.prompt_tps, r.sgemm_tps, 100.0 * r.prompt_tps / r.sgemm_tps, r.decode_tps,
                  r.decode_gbs, r.copy_bw / 1e9, 100.0 * r.decode_gbs * 1e9 / r.copy_bw, r.read_bw / 1e9,
                  100.0 * r.decode_gbs * 1e9 / r.read_bw);
      std::fflush(stdout);
    }
  }
  return 0;
}
