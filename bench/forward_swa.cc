// bench/forward rows for the sliding-window family: a synthetic gemma3 built
// in memory with the attention geometry of Gemma 3 1B (n_embd 1152, 4 query
// heads, 1 KV head of 256, window 512, pattern 6: five local layers per
// global one, FFN 6912; vocabulary 32000 instead of 262144 so that the
// output head does not dominate), F32. Every figure beside a baseline
// measured in the same run:
//   prompt tokens/s     vs cblas_sgemm on the same projection shapes
//   decode tokens/s     vs streaming the weights at the bandwidth a plain
//                       read loop reaches with the same threads
//   at a 4k context (a second model with the same attention geometry at full
//   depth, 26 layers, and a narrow FFN so that 4096 positions fill quickly):
//   checkpoint bytes    vs the formula n_local * (W - 1 + slack) * (K + V) * 4
//                       + header, and vs the full snapshot
//   capture / restore   vs a plain memcpy of the same bytes
//   decode at 4k        vs decode of the same model at a 64-token context
//
// Usage: bench_forward_swa [--threads N] [--layers N] [--prompt N] [--decode N] [--context N]
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

#include "backends/kernels/thread_pool.h"
#include "backends/model/gguf.h"
#include "backends/swa/swa_backend.h"
#include "bench/bench_util.h"
#include "synthetic/architectures.h"

namespace cairn {
namespace {

using bench::Best;
using bench::Clock;
using bench::Seconds;

int64_t QueryDim(const synthetic::GemmaShape& s) { return int64_t{s.n_head} * s.head_dim; }
int64_t KvDim(const synthetic::GemmaShape& s) { return int64_t{s.n_head_kv} * s.head_dim; }
int64_t LocalLayers(const synthetic::GemmaShape& s) {
  int64_t n = 0;
  for (int32_t il = 0; il < s.n_layer; ++il) n += il % s.pattern < s.pattern - 1;
  return n;
}

std::unique_ptr<Backend> MakeBackend(std::shared_ptr<const ModelFile> model, int threads, int32_t slack) {
  BackendOptions options;
  options.n_threads = threads;
  SwaOptions swa;
  swa.rollback_slack = slack;
  auto b = SwaFamily(swa).create(std::move(model), options);
  if (!b.ok()) {
    std::fprintf(stderr, "create: %s\n", std::string(b.status().message()).c_str());
    std::exit(1);
  }
  return std::move(*b);
}

// Absorbs tokens[0, n) in runs of `chunk`, logits of the last row only.
void Prefill(Backend& b, SequenceMemory* mem, const std::vector<TokenId>& tokens, int64_t n, int64_t chunk) {
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t e = std::min(n, s + chunk);
    const int32_t last[] = {static_cast<int32_t>(e - s - 1)};
    SequenceRun run{mem, static_cast<Pos>(s), std::span<const TokenId>(tokens).subspan(s, e - s), nullptr, last, {}};
    if (!b.Forward(std::span<const SequenceRun>(&run, 1)).ok()) std::abort();
  }
}

}  // namespace

int Main(int argc, char** argv) {
  int threads = 2, prompt = 512, decode = 16, context = 4096, layers = 12;
  bench::IntFlags(argc, argv,
                  {{"--threads", &threads},
                   {"--prompt", &prompt},
                   {"--decode", &decode},
                   {"--context", &context},
                   {"--layers", &layers}});
  // Gemma 3 1B's attention geometry.
  synthetic::GemmaShape s{.n_embd = 1152,
                          .n_ff = 6912,
                          .n_vocab = 32000,
                          .n_layer = layers,
                          .n_head = 4,
                          .n_head_kv = 1,
                          .head_dim = 256,
                          .window = 512,
                          .pattern = 6};
  std::printf(
      "synthetic gemma3: n_embd %ld, %ld layers (%ld local, window %ld), %ld heads / %ld KV heads of %ld, "
      "ffn %ld, vocab %ld, F32, %d threads\n",
      s.n_embd, s.n_layer, LocalLayers(s), s.window, s.n_head, s.n_head_kv, s.head_dim, s.n_ff, s.n_vocab, threads);

  // --- Baselines (OpenBLAS on its own threads, before the backend pins it).
  openblas_set_num_threads(threads);
  const int64_t M = prompt, E = s.n_embd, F = s.n_ff;
  const int64_t qkv = QueryDim(s) + 2 * KvDim(s);
  std::vector<float> act(static_cast<size_t>(M * std::max(F, QueryDim(s))), 0.01f), out(static_cast<size_t>(M * 2 * F));
  std::vector<float> w_qkv(static_cast<size_t>(E * qkv), 0.01f), w_o(static_cast<size_t>(QueryDim(s) * E), 0.01f),
      w_gu(static_cast<size_t>(E * 2 * F), 0.01f), w_d(static_cast<size_t>(F * E), 0.01f);
  auto gemm = [&](int64_t n_out, int64_t n_in, const float* w) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, n_out, n_in, 1.0f, act.data(), n_in, w, n_in, 0.0f,
                out.data(), n_out);
  };
  const double gemm_s = Best(3, [&] {
    gemm(qkv, E, w_qkv.data());
    gemm(E, QueryDim(s), w_o.data());
    gemm(2 * F, E, w_gu.data());
    gemm(E, F, w_d.data());
  });
  const double layer_flops = 2.0 * M * (E * qkv + QueryDim(s) * E + 2 * E * F + F * E);
  const double sgemm_flops = layer_flops / gemm_s;
  openblas_set_num_threads(1);
  act = {};
  out = {};
  w_qkv = {};
  w_o = {};
  w_gu = {};
  w_d = {};
  ThreadPool bw_pool(threads);
  const double bandwidth = bench::ReadBandwidth1GiB(bw_pool, 3);

  std::vector<TokenId> tokens(static_cast<size_t>(std::max(prompt, context)));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<TokenId>((i * 7919 + 1) % s.n_vocab);

  // --- Prompt and decode on the realistic-width model.
  double prompt_tps = 0, prompt_roof_tps = 0, decode_s = 0, decode_roof_s = 0;
  size_t weight_bytes = 0;
  {
    const auto t_build = Clock::now();
    std::unique_ptr<Backend> b = MakeBackend(bench::ModelOrDie(synthetic::Gemma(s), "bench-gemma3"), threads, 512);
    weight_bytes = b->info().weight_bytes;
    std::printf("model built in %.1f s; weights read per token %.1f MiB\n", Seconds(t_build, Clock::now()),
                weight_bytes / 1048576.0);
    std::unique_ptr<SequenceMemory> mem;
    const double prompt_s = Best(2, [&] {
      mem = *b->NewSequence();
      Prefill(*b, mem.get(), tokens, prompt, prompt);
    });
    prompt_tps = prompt / prompt_s;
    prompt_roof_tps = prompt / (layer_flops * s.n_layer / sgemm_flops);
    decode_s = bench::DecodeGreedy(*b, mem.get(), decode);
    decode_roof_s = static_cast<double>(weight_bytes) / bandwidth;
  }

  // --- A 4k context: same attention geometry at full depth, narrow FFN.
  synthetic::GemmaShape c = s;
  c.n_layer = 26;
  c.n_ff = 256;
  const int32_t slack = 512;
  std::unique_ptr<Backend> cb =
      MakeBackend(bench::ModelOrDie(synthetic::Gemma(c), "bench-gemma3-context"), threads, slack);
  auto short_mem = *cb->NewSequence();
  Prefill(*cb, short_mem.get(), tokens, 64, 64);
  const double decode_short_s = bench::DecodeGreedy(*cb, short_mem.get(), decode);
  auto mem = *cb->NewSequence();
  const auto t_fill = Clock::now();
  Prefill(*cb, mem.get(), tokens, context, 512);
  const double fill_s = Seconds(t_fill, Clock::now());
  const size_t cp_bytes = mem->Bytes(SnapshotScope::kCheckpoint);
  const size_t full_bytes = mem->Bytes(SnapshotScope::kFull);
  const size_t row_bytes = static_cast<size_t>(2 * KvDim(c)) * sizeof(float);
  const size_t header = (*cb->NewSequence())->Bytes(SnapshotScope::kCheckpoint);  // empty rings: the header alone
  const size_t formula = static_cast<size_t>(LocalLayers(c)) * (c.window - 1 + slack) * row_bytes + header;
  const size_t full_kv_all_layers = static_cast<size_t>(c.n_layer) * context * row_bytes;
  Snapshot snap;
  const double capture_s = Best(5, [&] { snap = *mem->Capture(SnapshotScope::kCheckpoint); });
  if (snap.bytes() != cp_bytes) std::abort();
  const double restore_s = Best(5, [&] {
    if (!mem->Restore(snap).ok()) std::abort();
  });
  const bench::MemcpySeconds copy = bench::MeasureMemcpy(cp_bytes, 5);
  const double memcpy_s = copy.reused, memcpy_fresh_s = copy.fresh;
  const double decode_long_s = bench::DecodeGreedy(*cb, mem.get(), decode);

  std::printf("\n%-40s %14s %14s %8s\n", "row", "cairn", "baseline", "ratio");
  std::printf("%-40s %12.1f/s %12.1f/s %7.1f%%   (baseline: cblas_sgemm %.1f GFLOP/s on the projections)\n",
              ("prompt tokens/s (" + std::to_string(prompt) + ")").c_str(), prompt_tps, prompt_roof_tps,
              100.0 * prompt_tps / prompt_roof_tps, sgemm_flops / 1e9);
  std::printf("%-40s %12.2f/s %12.2f/s %7.1f%%   (baseline: %.1f MiB weights at %.1f GB/s read)\n", "decode tokens/s",
              1.0 / decode_s, 1.0 / decode_roof_s, 100.0 * decode_roof_s / decode_s, weight_bytes / 1048576.0,
              bandwidth / 1e9);
  std::printf("context model: 26 layers (%ld local), ffn %ld; %d positions absorbed in %.1f s (runs of 512)\n",
              LocalLayers(c), c.n_ff, context, fill_s);
  std::printf("%-40s %14zu %14zu %7.3fx  (baseline: n_local %ld x (W-1+slack %ld) x (K+V) %zu B + header %zu)\n",
              ("checkpoint bytes at " + std::to_string(context)).c_str(), cp_bytes, formula,
              static_cast<double>(cp_bytes) / formula, LocalLayers(c), c.window - 1 + slack, row_bytes, header);
  std::printf("%-40s %14zu %14zu %7.3fx  (baseline: full snapshot, global K/V included)\n",
              "checkpoint vs full snapshot bytes", cp_bytes, full_bytes, static_cast<double>(cp_bytes) / full_bytes);
  std::printf("%-40s %14zu %14zu %7.3fx  (baseline: full K/V of every layer, as a transformer would keep)\n",
              "checkpoint vs all-layer K/V bytes", cp_bytes, full_kv_all_layers,
              static_cast<double>(cp_bytes) / full_kv_all_layers);
  std::printf("%-40s %12.3f ms %11.3f ms %7.2fx  (baseline: memcpy into a fresh vector; reused buffer %.3f ms)\n",
              "capture checkpoint", capture_s * 1e3, memcpy_fresh_s * 1e3, capture_s / memcpy_fresh_s, memcpy_s * 1e3);
  std::printf("%-40s %12.3f ms %11.3f ms %7.2fx  (baseline: memcpy into a reused buffer)\n", "restore checkpoint",
              restore_s * 1e3, memcpy_s * 1e3, restore_s / memcpy_s);
  std::printf("%-40s %12.2f/s %12.2f/s %7.1f%%   (baseline: the same model at a 64-token context)\n",
              ("decode tokens/s at " + std::to_string(context)).c_str(), 1.0 / decode_long_s, 1.0 / decode_short_s,
              100.0 * decode_short_s / decode_long_s);
  return 0;
}

}  // namespace cairn

int main(int argc, char** argv) { return cairn::Main(argc, argv); }
