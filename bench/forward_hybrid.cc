// bench/forward rows for the hybrid family: synthetic models of realistic
// size built in memory, F32 and Q8_0 matrices, vocabulary 32000, tied output:
//   qwen35         Qwen3.5-0.8B's shapes (BENCHMARKS.md bench-qwen35): n_embd
//                  1024, 24 layers (every 4th gated attention, 8 heads / 2 KV
//                  heads of 256, IMROPE 64 dims [11,11,10,0]), Gated DeltaNet
//                  with 16 key and 16 value heads of 128, conv 4, ffn 3584.
//   granitehybrid  n_embd 1024, 24 layers (attention at 5, 11, 17, 23 with
//                  16 heads / 4 KV heads of 64), Mamba-2 d_inner 2048, 32
//                  heads, d_state 128, 1 group, conv 4, ffn 2816.
// Every figure is printed beside a baseline measured in the same run:
//   prompt tokens/s    vs cblas_sgemm FLOP/s on the same weight shapes
//   decode tokens/s    vs streaming the weights at the read bandwidth a plain
//                      loop reaches with the same threads
//   checkpoint bytes   vs the architecture's formula
//   capture / restore  vs a plain memcpy of the same bytes
//
// Usage: bench_forward_hybrid [--threads N] [--prompt N] [--decode N] [--model qwen35|granitehybrid|all]
//                             [--type f32|q8_0|all]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/hybrid/hybrid_backend.h"
#include "backends/kernels/thread_pool.h"
#include "backends/model/gguf.h"
#include "bench/bench_util.h"
#include "synthetic/architectures.h"

namespace cairn {
namespace {

using bench::Best;
using bench::Clock;
using bench::Seconds;

constexpr int64_t kVocab = 32000;

// A built model and what the formulas need of it.
struct Spec {
  std::string arch;
  synthetic::SyntheticModel model{""};
  int64_t n_embd = 0, n_layer = 0, n_ff = 0, n_head_kv = 0, head_dim = 0, d_conv = 0;
  int64_t n_rec = 0;  // recurrent layers; the others attend
  // Recurrent part: floats of conv state and of recurrent state per layer.
  int64_t conv_channels = 0, state_floats = 0;
  int64_t n_attn() const { return n_layer - n_rec; }
  // Weight elements of the matrices one token multiplies (prompt FLOPs / 2):
  // every layer's weights.
  int64_t matrix_elems() const {
    int64_t n = 0;
    for (const synthetic::SyntheticTensor& t : model.tensors()) {
      if (t.weight && t.name.rfind("blk.", 0) == 0) n += t.n_elements();
    }
    return n;
  }
};

// Qwen3.5-0.8B's shapes (BENCHMARKS.md bench-qwen35), tied output.
Spec Qwen35Spec() {
  const synthetic::Qwen35Shape q{.n_embd = 1024,
                                 .n_vocab = kVocab,
                                 .n_ff = 3584,
                                 .n_layer = 24,
                                 .n_head = 8,
                                 .n_head_kv = 2,
                                 .head_dim = 256,
                                 .full_attention_interval = 4,
                                 .rope_dims = 64,
                                 .rope_sections = {11, 11, 10, 0},
                                 .ssm_k_heads = 16,
                                 .ssm_v_heads = 16,
                                 .d_state = 128,
                                 .n_ctx = 1 << 16,
                                 .tied_output = true};
  Spec s{"qwen35", synthetic::Qwen35(q), q.n_embd, q.n_layer, q.n_ff, q.n_head_kv, q.head_dim, q.d_conv};
  for (int32_t l = 0; l < q.n_layer; ++l) s.n_rec += !q.attention(l);
  s.conv_channels = q.conv_channels();
  s.state_floats = q.ssm_v_heads * q.d_state * q.d_state;
  return s;
}

// A granitehybrid of similar size: attention at 5, 11, 17, 23.
Spec GraniteSpec() {
  const synthetic::GraniteHybridShape g{.n_embd = 1024,
                                        .n_ff = 2816,
                                        .n_vocab = kVocab,
                                        .n_layer = 24,
                                        .n_head = 16,
                                        .n_head_kv = 4,
                                        .attention_period = 6,
                                        .d_inner = 2048,
                                        .d_state = 128,
                                        .ssm_heads = 32,
                                        .n_ctx = 1 << 16,
                                        .embedding_scale = 12.0f,
                                        .residual_scale = 0.22f,
                                        .logit_scale = 8.0f,
                                        .tied_output = true};
  Spec s{"granitehybrid", synthetic::GraniteHybrid(g), g.n_embd, g.n_layer, g.n_ff, g.n_head_kv, g.head_dim(),
         g.d_conv};
  for (int32_t l = 0; l < g.n_layer; ++l) s.n_rec += !g.attention(l);
  s.conv_channels = g.conv_channels();
  s.state_floats = g.d_state * g.inner();
  return s;
}

struct Baselines {
  double sgemm_flops = 0;
  double bandwidth = 0;
};

// cblas_sgemm FLOP/s on a representative projection (prompt x 1024 -> 6144)
// with OpenBLAS on `threads` threads; afterwards OpenBLAS is back on one
// thread, as the kernels keep it (the pool parallelizes).
double SgemmFlops(int threads, int64_t M) {
  openblas_set_num_threads(threads);
  const int64_t K = 1024, N = 6144;
  std::vector<float> a(static_cast<size_t>(M * K), 0.01f), w(static_cast<size_t>(N * K), 0.01f),
      c(static_cast<size_t>(M * N));
  const double t = Best(3, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a.data(), K, w.data(), K, 0.0f, c.data(), N);
  });
  openblas_set_num_threads(1);
  return 2.0 * M * N * K / t;
}

// On a shared machine the load drifts: each baseline is measured right
// before the figure it is compared with.
int RunModel(const std::string& which, GgmlType type, int threads, int prompt, int decode) {
  Baselines base;
  const auto t_build = Clock::now();
  Spec s = which == "qwen35" ? Qwen35Spec() : GraniteSpec();
  s.model.weight_type = type;
  BackendOptions options;
  options.n_threads = threads;
  auto backend = HybridFamily().create(bench::ModelOrDie(s.model, "bench-" + which), options);
  if (!backend.ok()) {
    std::fprintf(stderr, "create: %s\n", std::string(backend.status().message()).c_str());
    return 1;
  }
  Backend& b = **backend;
  std::printf(
      "\n== synthetic %s: n_embd %ld, %ld layers (%ld recurrent, %ld attention), ffn %ld, vocab %ld, %s; "
      "built in %.1f s; weights read per token %.1f MiB\n",
      which.c_str(), s.n_embd, s.n_layer, s.n_rec, s.n_attn(), s.n_ff, kVocab,
      type == GgmlType::kF32 ? "F32" : "Q8_0 matrices", Seconds(t_build, Clock::now()),
      b.info().weight_bytes / 1048576.0);

  std::vector<TokenId> tokens(static_cast<size_t>(prompt));
  for (int i = 0; i < prompt; ++i) tokens[i] = static_cast<TokenId>((i * 7919 + 1) % kVocab);
  const int32_t last_row[] = {prompt - 1};

  std::unique_ptr<SequenceMemory> memory;
  base.sgemm_flops = SgemmFlops(threads, prompt);
  const double prompt_s = Best(2, [&] {
    memory = *b.NewSequence();
    SequenceRun run{memory.get(), 0, tokens, nullptr, last_row, {}};
    if (!b.Forward(std::span<const SequenceRun>(&run, 1)).ok()) std::abort();
  });
  const double prompt_flops = 2.0 * static_cast<double>(s.matrix_elems()) * prompt;
  const double prompt_tps = prompt / prompt_s;
  const double prompt_roof_tps = prompt / (prompt_flops / base.sgemm_flops);

  {
    ThreadPool pool(threads);
    base.bandwidth = bench::ReadBandwidth1GiB(pool, 3);
  }
  const double decode_s = bench::DecodeGreedy(b, memory.get(), decode);
  const double decode_roof_s = static_cast<double>(b.info().weight_bytes) / base.bandwidth;

  // Checkpoint size beside the formula: per recurrent layer, the last
  // d_conv - 1 conv inputs and the recurrent state, F32.
  const size_t cp_bytes = memory->Bytes(SnapshotScope::kCheckpoint);
  const size_t cp_formula = static_cast<size_t>(s.n_rec * ((s.d_conv - 1) * s.conv_channels + s.state_floats) * 4);
  const size_t full_bytes = memory->Bytes(SnapshotScope::kFull);
  const size_t rows = static_cast<size_t>(memory->next_pos());
  const size_t kv_formula = static_cast<size_t>(s.n_attn() * 2 * s.n_head_kv * s.head_dim * 4) * rows;

  Snapshot snap;
  const double capture_s = Best(5, [&] { snap = *memory->Capture(SnapshotScope::kCheckpoint); });
  const double restore_s = Best(5, [&] {
    if (!memory->Restore(snap).ok()) std::abort();
  });
  const bench::MemcpySeconds copy = bench::MeasureMemcpy(cp_bytes, 5);
  const double memcpy_s = copy.reused, memcpy_fresh_s = copy.fresh;

  std::printf("%-36s %14s %14s %8s\n", "row", "cairn", "baseline", "ratio");
  std::printf("%-36s %12.1f/s %12.1f/s %7.1f%%   (baseline: cblas_sgemm %.1f GFLOP/s over the same weights)\n",
              ("prompt tokens/s (" + std::to_string(prompt) + ")").c_str(), prompt_tps, prompt_roof_tps,
              100.0 * prompt_tps / prompt_roof_tps, base.sgemm_flops / 1e9);
  std::printf("%-36s %12.2f/s %12.2f/s %7.1f%%   (baseline: %.1f MiB weights at %.1f GB/s read)\n", "decode tokens/s",
              1.0 / decode_s, 1.0 / decode_roof_s, 100.0 * decode_roof_s / decode_s, b.info().weight_bytes / 1048576.0,
              base.bandwidth / 1e9);
  std::printf("%-36s %14zu %14zu %7.4fx  (formula: %ld recurrent layers x ((%ld - 1) x %ld conv + %ld state) x 4 B)\n",
              "checkpoint bytes per sequence", cp_bytes, cp_formula, static_cast<double>(cp_bytes) / cp_formula,
              s.n_rec, s.d_conv, s.conv_channels, s.state_floats);
  std::printf("%-36s %14zu %14zu %7.4fx  (formula: checkpoint + %ld attention layers x 2 x %ld x 4 B x %zu rows)\n",
              "full snapshot bytes", full_bytes, cp_formula + kv_formula,
              static_cast<double>(full_bytes) / (cp_formula + kv_formula), s.n_attn(), s.n_head_kv * s.head_dim, rows);
  std::printf("%-36s %12.3f ms %11.3f ms %7.2fx  (baseline: memcpy of the same bytes into a fresh vector)\n",
              "capture one checkpoint", capture_s * 1e3, memcpy_fresh_s * 1e3, capture_s / memcpy_fresh_s);
  std::printf("%-36s %12.3f ms %11.3f ms %7.2fx  (baseline: memcpy of the same bytes into a reused buffer)\n",
              "restore one checkpoint", restore_s * 1e3, memcpy_s * 1e3, restore_s / memcpy_s);
  return 0;
}

}  // namespace

int Main(int argc, char** argv) {
  KeepFreedSnapshotMemory();
  int threads = 2, prompt = 512, decode = 16;
  std::string which = "all", types = "all";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--model" || k == "--type") (k == "--model" ? which : types) = argv[i + 1];
  }
  bench::IntFlags(argc, argv, {{"--threads", &threads}, {"--prompt", &prompt}, {"--decode", &decode}});
  if (threads <= 0 || prompt <= 0 || decode <= 0 || (which != "all" && which != "qwen35" && which != "granitehybrid") ||
      (types != "all" && types != "f32" && types != "q8_0")) {
    std::fprintf(stderr,
                 "usage: bench_forward_hybrid [--threads N] [--prompt N] [--decode N] "
                 "[--model qwen35|granitehybrid|all] [--type f32|q8_0|all]\n");
    return 2;
  }
  std::printf("%d threads; baselines measured right before each figure\n", threads);
  std::printf(
      "reference (BENCHMARKS.md, llama.cpp bench-qwen35, same machine kind, 2 threads): F32 prompt 133/s, "
      "decode 17.4/s; Q8_0 prompt 208/s, decode 49.0/s\n");
  for (const std::string m : {"qwen35", "granitehybrid"}) {
    if (which != "all" && which != m) continue;
    for (GgmlType t : {GgmlType::kF32, GgmlType::kQ8_0}) {
      if (types != "all" && types != (t == GgmlType::kF32 ? "f32" : "q8_0")) continue;
      if (int rc = RunModel(m, t, threads, prompt, decode); rc != 0) return rc;
    }
  }
  return 0;
}

}  // namespace cairn

int main(int argc, char** argv) { return cairn::Main(argc, argv); }
