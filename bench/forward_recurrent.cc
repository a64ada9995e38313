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
#include "backends/model/gguf_writer.h"
#include "backends/recurrent/recurrent_backend.h"
#include "bench/bench_util.h"

extern "C" void openblas_set_num_threads(int);

namespace cairn {
namespace {

using bench::Best;
using bench::Clock;
using bench::Rng;
using bench::Seconds;

struct Shape {
  int64_t n_embd = 1024, n_layer = 24, d_state = 128, n_head = 16, n_group = 1, d_conv = 4, n_vocab = 32000;
  int64_t d_inner() const { return 2 * n_embd; }
  int64_t conv_ch() const { return d_inner() + 2 * n_group * d_state; }
  int64_t in_proj() const { return 2 * d_inner() + 2 * n_group * d_state + n_head; }
};

std::shared_ptr<const ModelFile> BuildModel(const Shape& s) {
  GgufWriter w;
  const std::string a = "mamba2";
  w.SetString("general.architecture", a);
  w.SetUint32(a + ".context_length", 1 << 20);
  w.SetUint32(a + ".embedding_length", static_cast<uint32_t>(s.n_embd));
  w.SetUint32(a + ".block_count", static_cast<uint32_t>(s.n_layer));
  w.SetFloat32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetUint32(a + ".ssm.conv_kernel", static_cast<uint32_t>(s.d_conv));
  w.SetUint32(a + ".ssm.inner_size", static_cast<uint32_t>(s.d_inner()));
  w.SetUint32(a + ".ssm.state_size", static_cast<uint32_t>(s.d_state));
  w.SetUint32(a + ".ssm.time_step_rank", static_cast<uint32_t>(s.n_head));
  w.SetUint32(a + ".ssm.group_count", static_cast<uint32_t>(s.n_group));
  Rng rng;
  // Scales keep activations of order 1 through 24 residual layers.
  const float in_scale = 1.0f / std::sqrt(static_cast<float>(s.n_embd));
  const float out_scale = 1.0f / std::sqrt(static_cast<float>(s.d_inner()));
  w.AddF32Tensor("token_embd.weight", {s.n_embd, s.n_vocab}, rng.Vec(s.n_embd * s.n_vocab, -1.0f, 1.0f));
  w.AddF32Tensor("output_norm.weight", {s.n_embd}, std::vector<float>(s.n_embd, 1.0f));
  w.AddF32Tensor("output.weight", {s.n_embd, s.n_vocab}, rng.Vec(s.n_embd * s.n_vocab, -in_scale, in_scale));
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.AddF32Tensor(p + "attn_norm.weight", {s.n_embd}, std::vector<float>(s.n_embd, 1.0f));
    w.AddF32Tensor(p + "ssm_in.weight", {s.n_embd, s.in_proj()}, rng.Vec(s.n_embd * s.in_proj(), -in_scale, in_scale));
    w.AddF32Tensor(p + "ssm_conv1d.weight", {s.d_conv, s.conv_ch()}, rng.Vec(s.d_conv * s.conv_ch(), -0.5f, 0.5f));
    w.AddF32Tensor(p + "ssm_conv1d.bias", {s.conv_ch()}, rng.Vec(s.conv_ch(), -0.1f, 0.1f));
    w.AddF32Tensor(p + "ssm_dt.bias", {s.n_head}, rng.Vec(s.n_head, -4.0f, -2.0f));
    w.AddF32Tensor(p + "ssm_a", {1, s.n_head}, rng.Vec(s.n_head, -8.0f, -1.0f));
    w.AddF32Tensor(p + "ssm_d", {1, s.n_head}, std::vector<float>(s.n_head, 1.0f));
    w.AddF32Tensor(p + "ssm_norm.weight", {s.d_inner() / s.n_group, s.n_group}, std::vector<float>(s.d_inner(), 1.0f));
    w.AddF32Tensor(p + "ssm_out.weight", {s.d_inner(), s.n_embd}, rng.Vec(s.d_inner() * s.n_embd, -out_scale, out_scale));
  }
  std::vector<uint8_t> bytes = w.Serialize();
  w = GgufWriter();
  return bench::ModelOrDie(bytes, "bench-mamba2");
}

}  // namespace

int Main(int argc, char** argv) {
  KeepFreedSnapshotMemory();
  int threads = 2, prompt = 512, decode = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (k == "--threads") threads = v;
    else if (k == "--prompt") prompt = v;
    else if (k == "--decode") decode = v;
  }
  const Shape s;
  std::printf("synthetic mamba2: n_embd %ld, %ld layers, d_inner %ld, d_state %ld, %ld heads, %ld group, vocab %ld, F32, %d threads\n",
              s.n_embd, s.n_layer, s.d_inner(), s.d_state, s.n_head, s.n_group, s.n_vocab, threads);

  // The machine is shared: every measurement is repeated `reps` times, each
  // time right next to its baseline, and the best of each is kept, so that
  // both see the same (least) contention.
  const int reps = 3;
  const int64_t M = prompt;
  std::vector<float> ga(static_cast<size_t>(M * s.d_inner()), 0.01f), gc(static_cast<size_t>(M * s.in_proj()));
  std::vector<float> w_in(static_cast<size_t>(s.n_embd * s.in_proj()), 0.01f);
  std::vector<float> w_out(static_cast<size_t>(s.d_inner() * s.n_embd), 0.01f);
  const double layer_flops = 2.0 * M * (s.n_embd * s.in_proj() + s.d_inner() * s.n_embd);
  // cblas_sgemm with OpenBLAS's own `threads` threads on one layer's two
  // projection shapes. The backend's MatMul runs OpenBLAS single-threaded
  // under its own pool, so the count is put back to 1 afterwards.
  auto sgemm_layer = [&] {
    openblas_set_num_threads(threads);
    const double t = Best(2, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, s.in_proj(), s.n_embd, 1.0f, ga.data(), s.n_embd,
                  w_in.data(), s.n_embd, 0.0f, gc.data(), s.in_proj());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, s.n_embd, s.d_inner(), 1.0f, ga.data(), s.d_inner(),
                  w_out.data(), s.d_inner(), 0.0f, gc.data(), s.n_embd);
    });
    openblas_set_num_threads(1);
    return t;
  };
  ThreadPool bw_pool(threads);
  const std::vector<float> bw_buf(size_t{1} << 28, 1.0f);  // 1 GiB, larger than any cache

  // --- The model.
  const auto t_build = Clock::now();
  std::shared_ptr<const ModelFile> model = BuildModel(s);
  BackendOptions options;
  options.n_threads = threads;
  auto backend = CreateRecurrentBackend(model, options);
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
  TokenId next = 5;
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
    const auto t1 = Clock::now();
    for (int i = 0; i < decode; ++i) {
      const TokenId tok[] = {next};
      SequenceRun step{memory.get(), memory->next_pos(), tok, nullptr, row0, {}};
      auto out = b.Forward(std::span<const SequenceRun>(&step, 1));
      if (!out.ok()) std::abort();
      next = static_cast<TokenId>(std::max_element((*out)[0].values.begin(), (*out)[0].values.end()) -
                                  (*out)[0].values.begin());
    }
    decode_s = std::min(decode_s, Seconds(t1, Clock::now()) / decode);
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
        runs[k] = SequenceRun{seqs[k].get(), seqs[k]->next_pos(), std::span<const TokenId>(&toks[k], 1), nullptr, row0, {}};
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
  std::printf("%-34s %12.2f/s %12.2f/s %7.1f%%   (baseline: %.1f MiB weights at %.1f GB/s read)\n",
              "decode tokens/s", 1.0 / decode_s, 1.0 / decode_roof_s, 100.0 * decode_roof_s / decode_s,
              b.info().weight_bytes / 1048576.0, bandwidth / 1e9);
  std::printf("%-34s %12.2f/s %12.2f/s %7.2fx  (baseline: single-sequence decode above)\n",
              "decode, 8 sequences per Forward", kBatch / batch_step_s, 1.0 / decode_s, kBatch / batch_step_s * decode_s);
  std::printf("%-34s %12.1f/s %12.1f/s %7.1f%%   (%zu snapshots inside the run, %.3f ms each; baseline: the same run without)\n",
              "prompt tokens/s, tail snapshots", prompt / tail_s, prompt / prompt_s, 100.0 * prompt_s / tail_s,
              tail_rows.size(), 1e3 * (tail_s - prompt_s) / static_cast<double>(tail_rows.size()));
  kept.clear();
  std::printf("%-34s %14zu\n", "state bytes per sequence", state_bytes);
  std::printf("%-34s %12.3f ms %11.3f ms %7.2fx  (baseline: memcpy into a fresh vector; into a reused buffer %.3f ms)\n",
              "capture one state", capture_s * 1e3, memcpy_fresh_s * 1e3, capture_s / memcpy_fresh_s,
              memcpy_s * 1e3);
  std::printf("%-34s %12.3f ms %11.3f ms %7.2fx  (baseline: memcpy into a reused buffer)\n", "restore one state",
              restore_s * 1e3, memcpy_s * 1e3, restore_s / memcpy_s);
  return 0;
}

}  // namespace cairn

int main(int argc, char** argv) { return cairn::Main(argc, argv); }
