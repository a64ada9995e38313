// bench/forward rows for the recurrent family: a synthetic Mamba-2 of
// realistic size (n_embd 1024, 24 layers, d_state 128, 16 heads of 128,
// vocabulary 32000, F32) built in memory. Every figure is printed beside a
// baseline measured in the same run:
//   prompt tokens/s    vs cblas_sgemm on the same projection shapes
//   decode tokens/s    vs the time to stream the weights at the bandwidth a
//                      plain read loop reaches with the same threads
//   capture / restore  vs a plain memcpy of the same number of bytes
//
// Usage: bench_forward_recurrent [--threads N] [--prompt N] [--decode N]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "backends/kernels/thread_pool.h"
#include "backends/model/gguf.h"
#include "backends/recurrent/recurrent_backend.h"
#include "bench/bench_util.h"
#include "synthetic/architectures.h"

namespace cairn {
namespace {

using bench::Best;
using bench::Clock;
using bench::Seconds;

}  // namespace

int Main(int argc, char** argv) {
  KeepFreedSnapshotMemory();
  int threads = 2, prompt = 512, decode = 32;
  bench::IntFlags(argc, argv, {{"--threads", &threads}, {"--prompt", &prompt}, {"--decode", &decode}});
  const synthetic::Mamba2Shape s{.n_embd = 1024, .n_vocab = 32000, .d_state = 128, .n_head = 16, .n_layer = 24};
  std::printf(
      "synthetic mamba2: n_embd %ld, %ld layers, d_inner %ld, d_state %ld, %ld heads, %ld group, vocab %ld, F32, %d "
      "threads\n",
      s.n_embd, s.n_layer, s.inner(), s.d_state, s.n_head, s.n_group, s.n_vocab, threads);

  // The machine is shared: every measurement is repeated `reps` times, each
  // time right next to its baseline, and the best of each is kept, so that
  // both see the same (least) contention.
  const int reps = 3;
  const int64_t M = prompt;
  std::vector<float> ga(static_cast<size_t>(M * s.inner()), 0.01f), gc(static_cast<size_t>(M * s.in_proj()));
  std::vector<float> w_in(static_cast<size_t>(s.n_embd * s.in_proj()), 0.01f);
  std::vector<float> w_out(static_cast<size_t>(s.inner() * s.n_embd), 0.01f);
  const double layer_flops = 2.0 * M * (s.n_embd * s.in_proj() + s.inner() * s.n_embd);
  // cblas_sgemm with OpenBLAS's own `threads` threads on one layer's two
  // projection shapes. The backend's MatMul runs OpenBLAS single-threaded
  // under its own pool, so the count is put back to 1 afterwards.
  auto sgemm_layer = [&] {
    openblas_set_num_threads(threads);
    const double t = Best(2, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, s.in_proj(), s.n_embd, 1.0f, ga.data(), s.n_embd,
                  w_in.data(), s.n_embd, 0.0f, gc.data(), s.in_proj());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, s.n_embd, s.inner(), 1.0f, ga.data(), s.inner(),
                  w_out.data(), s.inner(), 0.0f, gc.data(), s.n_embd);
    });
    openblas_set_num_threads(1);
    return t;
  };
  ThreadPool bw_pool(threads);
  const std::vector<float> bw_buf(size_t{1} << 28, 1.0f);  // 1 GiB, larger than any cache

  // --- The model.
  const auto t_build = Clock::now();
  std::shared_ptr<const ModelFile> model = bench::ModelOrDie(synthetic::Mamba2(s), "bench-mamba2");
  BackendOptions options;
  options.n_threads = threads;
  auto backend = RecurrentFamily().create(model, options);
  if (!backend.ok()) {
    std::fprintf(stderr, "create: %s\n", std::string(backend.status().message()).c_str());
    return 1;
  }
  Backend& b = **backend;
  std::printf("model built in %.1f s; weights read per token %.1f MiB\n", Seconds(t_build, Clock::now()),
              b.info().weight_bytes / 1048576.0);

  std::vector<TokenId> tokens(static_cast<size_t>(prompt));
  for (int i = 0; i < prompt; ++i) tokens[i] = (i * 7919 + 1) % s.n_vocab;
  const int32_t last_row[] = {prompt - 1};
  const int32_t row0[] = {0};

  // The engine's default tail checkpoints: every 8 positions over the last
  // 128 of a prompt, taken inside the Forward call (snapshot_rows).
  std::vector<int32_t> tail_rows;
  for (int32_t row = prompt - 128 + 7; row < prompt - 1; row += 8) tail_rows.push_back(row);

  double gemm_s = 1e30, prompt_s = 1e30, bw_s = 1e30, decode_s = 1e30, tail_s = 1e30;
  std::unique_ptr<SequenceMemory> memory;
  std::vector<RunLogits> kept;  // the last run's snapshots stay alive, as in a store
  for (int r = 0; r < reps; ++r) {
    gemm_s = std::min(gemm_s, sgemm_layer());
    const auto t0 = Clock::now();
    memory = *b.NewSequence();
    SequenceRun run{memory.get(), 0, tokens, nullptr, last_row, {}};
    if (!b.Forward(std::span<const SequenceRun>(&run, 1)).ok()) std::abort();
    prompt_s = std::min(prompt_s, Seconds(t0, Clock::now()));

    auto tail_memory = *b.NewSequence();
    const auto t_tail = Clock::now();
    SequenceRun tail_run{tail_memory.get(), 0, tokens, nullptr, last_row, tail_rows};
    auto tail_out = b.Forward(std::span<const SequenceRun>(&tail_run, 1));
    if (!tail_out.ok()) std::abort();
    tail_s = std::min(tail_s, Seconds(t_tail, Clock::now()));
    kept = *std::move(tail_out);

    bw_s = std::min(bw_s, 1.0 / bench::ReadBandwidth(bw_pool, bw_buf, 2));  // seconds per byte
    decode_s = std::min(decode_s, bench::DecodeGreedy(b, memory.get(), decode));
  }
  const double sgemm_flops = layer_flops / gemm_s;
  const double bandwidth = 1.0 / bw_s;
  const double prompt_flops = layer_flops * s.n_layer;  // projections only; logits of one row
  const double prompt_tps = prompt / prompt_s;
  const double prompt_roof_tps = prompt / (prompt_flops / sgemm_flops);
  const double decode_roof_s = static_cast<double>(b.info().weight_bytes) / bandwidth;

  // Batched decode: kBatch sequences advance one token each per Forward, as
  // the scheduler runs them; beside single-sequence decode of this run.
  constexpr int kBatch = 8;
  std::vector<std::unique_ptr<SequenceMemory>> seqs;
  for (int i = 0; i < kBatch; ++i) {
    seqs.push_back(*b.NewSequence());
    SequenceRun run{seqs.back().get(), 0, std::span<const TokenId>(tokens).first(16), nullptr, {}, {}};
    if (!b.Forward(std::span<const SequenceRun>(&run, 1)).ok()) std::abort();
  }
  double batch_step_s = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < decode / 2; ++i) {
      std::vector<TokenId> toks(kBatch);
      std::vector<SequenceRun> runs(kBatch);
      for (int k = 0; k < kBatch; ++k) {
        toks[k] = static_cast<TokenId>((i * 31 + k * 7) % s.n_vocab);
        runs[k] =
            SequenceRun{seqs[k].get(), seqs[k]->next_pos(), std::span<const TokenId>(&toks[k], 1), nullptr, row0, {}};
      }
      if (!b.Forward(runs).ok()) std::abort();
    }
    batch_step_s = std::min(batch_step_s, Seconds(t0, Clock::now()) / (decode / 2));
  }
  seqs.clear();

  // State capture / restore vs memcpy of the same bytes, interleaved.
  const size_t state_bytes = memory->Bytes(SnapshotScope::kCheckpoint);
  std::vector<uint8_t> src(state_bytes, 1), dst(state_bytes, 0);
  Snapshot snap;
  double capture_s = 1e30, restore_s = 1e30, memcpy_s = 1e30, memcpy_fresh_s = 1e30;
  for (int r = 0; r < 10; ++r) {
    memcpy_s = std::min(memcpy_s, Best(1, [&] { std::memcpy(dst.data(), src.data(), state_bytes); }));
    memcpy_fresh_s = std::min(memcpy_fresh_s, Best(1, [&] {
                                std::vector<uint8_t> fresh(src.begin(), src.end());
                                if (fresh[state_bytes / 2] != 1) std::abort();
                              }));
    capture_s = std::min(capture_s, Best(1, [&] { snap = *memory->Capture(SnapshotScope::kCheckpoint); }));
    restore_s = std::min(restore_s, Best(1, [&] {
                           if (!memory->Restore(snap).ok()) std::abort();
                         }));
  }

  std::printf("\n%-34s %14s %14s %8s\n", "row", "cairn", "baseline", "ratio");
  std::printf("%-34s %12.1f/s %12.1f/s %7.1f%%   (baseline: cblas_sgemm %.1f GFLOP/s on the projections)\n",
              "prompt tokens/s (512)", prompt_tps, prompt_roof_tps, 100.0 * prompt_tps / prompt_roof_tps,
              sgemm_flops / 1e9);
  std::printf("%-34s %12.2f/s %12.2f/s %7.1f%%   (baseline: %.1f MiB weights at %.1f GB/s read)\n", "decode tokens/s",
              1.0 / decode_s, 1.0 / decode_roof_s, 100.0 * decode_roof_s / decode_s, b.info().weight_bytes / 1048576.0,
              bandwidth / 1e9);
  std::printf("%-34s %12.2f/s %12.2f/s %7.2fx  (baseline: single-sequence decode above)\n",
              "decode, 8 sequences per Forward", kBatch / batch_step_s, 1.0 / decode_s,
              kBatch / batch_step_s * decode_s);
  std::printf(
      "%-34s %12.1f/s %12.1f/s %7.1f%%   (%zu snapshots inside the run, %.3f ms each; baseline: the same run "
      "without)\n",
      "prompt tokens/s, tail snapshots", prompt / tail_s, prompt / prompt_s, 100.0 * prompt_s / tail_s,
      tail_rows.size(), 1e3 * (tail_s - prompt_s) / static_cast<double>(tail_rows.size()));
  kept.clear();
  std::printf("%-34s %14zu\n", "state bytes per sequence", state_bytes);
  std::printf(
      "%-34s %12.3f ms %11.3f ms %7.2fx  (baseline: memcpy into a fresh vector; into a reused buffer %.3f ms)\n",
      "capture one state", capture_s * 1e3, memcpy_fresh_s * 1e3, capture_s / memcpy_fresh_s, memcpy_s * 1e3);
  std::printf("%-34s %12.3f ms %11.3f ms %7.2fx  (baseline: memcpy into a reused buffer)\n", "restore one state",
              restore_s * 1e3, memcpy_s * 1e3, restore_s / memcpy_s);
  return 0;
}

}  // namespace cairn

int main(int argc, char** argv) { return cairn::Main(argc, argv); }
