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
#include "backends/model/dequant.h"
#include "backends/model/gguf.h"
#include "backends/model/gguf_writer.h"
#include "bench/bench_util.h"

extern "C" void openblas_set_num_threads(int);

namespace cairn {
namespace {

using bench::Best;
using bench::Clock;
using bench::Rng;
using bench::Seconds;

constexpr int64_t kVocab = 32000;

// Sizes shared by both models, and what the formulas need.
struct Spec {
  std::string arch;
  int64_t n_embd = 1024, n_layer = 24, n_ff = 0, n_head = 0, n_head_kv = 0, head_dim = 0, d_conv = 4;
  std::vector<bool> recurrent;  // per layer
  // Recurrent part: floats of conv state and of recurrent state per layer.
  int64_t conv_channels = 0, state_floats = 0;
  // Weight elements of the matrices one token multiplies (prompt FLOPs / 2).
  int64_t matrix_elems = 0;
  GgmlType type = GgmlType::kF32;  // of the matrices and the (tied) embedding
  int64_t n_rec() const { return std::count(recurrent.begin(), recurrent.end(), true); }
  int64_t n_attn() const { return n_layer - n_rec(); }
};

// Q8_0 blocks of 32: an fp16 scale max|x| / 127, then 32 rounded int8.
std::vector<uint8_t> QuantizeQ8_0(const std::vector<float>& x) {
  std::vector<uint8_t> out;
  out.reserve(x.size() / 32 * 34);
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0.0f;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::abs(x[b + i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = Fp32ToFp16(d);
    out.push_back(static_cast<uint8_t>(h & 0xff));
    out.push_back(static_cast<uint8_t>(h >> 8));
    for (size_t i = 0; i < 32; ++i) out.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::lround(x[b + i] * id))));
  }
  return out;
}

void AddWeights(GgufWriter& w, const Spec& s, const std::string& name, int64_t n_in, int64_t n_out,
                const std::vector<float>& values) {
  if (s.type == GgmlType::kQ8_0 && n_in % 32 == 0) {
    w.AddTensor(name, GgmlType::kQ8_0, {n_in, n_out}, QuantizeQ8_0(values));
  } else {
    w.AddF32Tensor(name, {n_in, n_out}, values);
  }
}

// Adds a random matrix [n_in, n_out] scaled to keep activations of order 1.
void Matrix(GgufWriter& w, Rng& rng, Spec& s, const std::string& name, int64_t n_in, int64_t n_out) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(n_in));
  AddWeights(w, s, name, n_in, n_out, rng.Vec(n_in * n_out, -scale, scale));
  s.matrix_elems += n_in * n_out;
}

void Ones(GgufWriter& w, const std::string& name, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  w.AddF32Tensor(name, std::move(shape), std::vector<float>(static_cast<size_t>(n), 1.0f));
}

void Common(GgufWriter& w, Rng& rng, const Spec& s) {
  const std::string a = s.arch;
  w.SetString("general.architecture", a);
  w.SetUint32(a + ".context_length", 1 << 16);
  w.SetUint32(a + ".embedding_length", static_cast<uint32_t>(s.n_embd));
  w.SetUint32(a + ".block_count", static_cast<uint32_t>(s.n_layer));
  w.SetUint32(a + ".feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.SetUint32(a + ".attention.head_count", static_cast<uint32_t>(s.n_head));
  w.SetFloat32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  w.SetUint32(a + ".ssm.conv_kernel", static_cast<uint32_t>(s.d_conv));
  AddWeights(w, s, "token_embd.weight", s.n_embd, kVocab, rng.Vec(s.n_embd * kVocab, -1.0f, 1.0f));
  Ones(w, "output_norm.weight", {s.n_embd});
}

void Ffn(GgufWriter& w, Rng& rng, Spec& s, const std::string& p) {
  Matrix(w, rng, s, p + "ffn_gate.weight", s.n_embd, s.n_ff);
  Matrix(w, rng, s, p + "ffn_up.weight", s.n_embd, s.n_ff);
  Matrix(w, rng, s, p + "ffn_down.weight", s.n_ff, s.n_embd);
}

std::vector<uint8_t> BuildQwen35(Spec& s) {
  s.arch = "qwen35";
  s.n_ff = 3584;
  s.n_head = 8;
  s.n_head_kv = 2;
  s.head_dim = 256;
  const int64_t Hk = 16, Hv = 16, dk = 128, dv = 128;
  s.conv_channels = 2 * Hk * dk + Hv * dv;
  s.state_floats = Hv * dv * dk;
  GgufWriter w;
  Rng rng;
  Common(w, rng, s);
  const std::string a = s.arch;
  w.SetUint32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.SetUint32(a + ".attention.key_length", static_cast<uint32_t>(s.head_dim));
  w.SetUint32(a + ".attention.value_length", static_cast<uint32_t>(s.head_dim));
  w.SetUint32(a + ".full_attention_interval", 4);
  w.SetUint32(a + ".rope.dimension_count", 64);
  w.SetInt32Array(a + ".rope.dimension_sections", {11, 11, 10, 0});
  w.SetFloat32(a + ".rope.freq_base", 1e7f);
  w.SetUint32(a + ".ssm.state_size", static_cast<uint32_t>(dk));
  w.SetUint32(a + ".ssm.group_count", static_cast<uint32_t>(Hk));
  w.SetUint32(a + ".ssm.time_step_rank", static_cast<uint32_t>(Hv));
  w.SetUint32(a + ".ssm.inner_size", static_cast<uint32_t>(Hv * dv));
  const int64_t E = s.n_embd;
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const bool rec = (l + 1) % 4 != 0;
    s.recurrent.push_back(rec);
    Ones(w, p + "attn_norm.weight", {E});
    Ones(w, p + "post_attention_norm.weight", {E});
    if (rec) {
      Matrix(w, rng, s, p + "attn_qkv.weight", E, s.conv_channels);
      Matrix(w, rng, s, p + "attn_gate.weight", E, Hv * dv);
      Matrix(w, rng, s, p + "ssm_beta.weight", E, Hv);
      Matrix(w, rng, s, p + "ssm_alpha.weight", E, Hv);
      Matrix(w, rng, s, p + "ssm_out.weight", Hv * dv, E);
      w.AddF32Tensor(p + "ssm_conv1d.weight", {s.d_conv, s.conv_channels}, rng.Vec(s.d_conv * s.conv_channels, -0.5f, 0.5f));
      w.AddF32Tensor(p + "ssm_dt.bias", {Hv}, rng.Vec(Hv, -2.0f, 0.0f));
      w.AddF32Tensor(p + "ssm_a", {Hv}, rng.Vec(Hv, -2.0f, -0.5f));
      Ones(w, p + "ssm_norm.weight", {dv});
    } else {
      Matrix(w, rng, s, p + "attn_q.weight", E, 2 * s.n_head * s.head_dim);
      Matrix(w, rng, s, p + "attn_k.weight", E, s.n_head_kv * s.head_dim);
      Matrix(w, rng, s, p + "attn_v.weight", E, s.n_head_kv * s.head_dim);
      Matrix(w, rng, s, p + "attn_output.weight", s.n_head * s.head_dim, E);
      Ones(w, p + "attn_q_norm.weight", {s.head_dim});
      Ones(w, p + "attn_k_norm.weight", {s.head_dim});
    }
    Ffn(w, rng, s, p);
  }
  return w.Serialize();
}

std::vector<uint8_t> BuildGranite(Spec& s) {
  s.arch = "granitehybrid";
  s.n_ff = 2816;
  s.n_head = 16;
  s.n_head_kv = 4;
  s.head_dim = 64;
  const int64_t d_inner = 2048, d_state = 128, heads = 32, groups = 1;
  s.conv_channels = d_inner + 2 * groups * d_state;
  s.state_floats = d_state * d_inner;
  const int64_t in_proj = 2 * d_inner + 2 * groups * d_state + heads;
  GgufWriter w;
  Rng rng;
  Common(w, rng, s);
  const std::string a = s.arch;
  std::vector<int32_t> kv(static_cast<size_t>(s.n_layer));
  for (int64_t l = 0; l < s.n_layer; ++l) kv[l] = (l % 6 == 5) ? static_cast<int32_t>(s.n_head_kv) : 0;
  w.SetInt32Array(a + ".attention.head_count_kv", kv);
  w.SetFloat32(a + ".attention.scale", 1.0f / 64.0f);
  w.SetFloat32(a + ".embedding_scale", 12.0f);
  w.SetFloat32(a + ".residual_scale", 0.22f);
  w.SetFloat32(a + ".logit_scale", 8.0f);
  w.SetBool(a + ".rope.scaling.finetuned", false);
  w.SetUint32(a + ".ssm.inner_size", static_cast<uint32_t>(d_inner));
  w.SetUint32(a + ".ssm.state_size", static_cast<uint32_t>(d_state));
  w.SetUint32(a + ".ssm.time_step_rank", static_cast<uint32_t>(heads));
  w.SetUint32(a + ".ssm.group_count", static_cast<uint32_t>(groups));
  const int64_t E = s.n_embd;
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const bool rec = kv[l] == 0;
    s.recurrent.push_back(rec);
    Ones(w, p + "attn_norm.weight", {E});
    Ones(w, p + "ffn_norm.weight", {E});
    if (rec) {
      Matrix(w, rng, s, p + "ssm_in.weight", E, in_proj);
      Matrix(w, rng, s, p + "ssm_out.weight", d_inner, E);
      w.AddF32Tensor(p + "ssm_conv1d.weight", {s.d_conv, s.conv_channels}, rng.Vec(s.d_conv * s.conv_channels, -0.5f, 0.5f));
      w.AddF32Tensor(p + "ssm_conv1d.bias", {s.conv_channels}, rng.Vec(s.conv_channels, -0.1f, 0.1f));
      w.AddF32Tensor(p + "ssm_dt.bias", {heads}, rng.Vec(heads, -4.0f, -2.0f));
      w.AddF32Tensor(p + "ssm_a", {1, heads}, rng.Vec(heads, -8.0f, -1.0f));
      Ones(w, p + "ssm_d", {1, heads});
      Ones(w, p + "ssm_norm.weight", {d_inner / groups, groups});
    } else {
      Matrix(w, rng, s, p + "attn_q.weight", E, s.n_head * s.head_dim);
      Matrix(w, rng, s, p + "attn_k.weight", E, s.n_head_kv * s.head_dim);
      Matrix(w, rng, s, p + "attn_v.weight", E, s.n_head_kv * s.head_dim);
      Matrix(w, rng, s, p + "attn_output.weight", s.n_head * s.head_dim, E);
    }
    Ffn(w, rng, s, p);
  }
  return w.Serialize();
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
  Spec s;
  s.type = type;
  const auto t_build = Clock::now();
  std::vector<uint8_t> bytes = which == "qwen35" ? BuildQwen35(s) : BuildGranite(s);
  auto model = ModelFile::FromBuffer(bytes, "bench-" + which);
  bytes = std::vector<uint8_t>();
  if (!model.ok()) {
    std::fprintf(stderr, "synthetic model: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  BackendOptions options;
  options.n_threads = threads;
  auto backend = CreateHybridBackend(std::shared_ptr<const ModelFile>(std::move(*model)), options);
  if (!backend.ok()) {
    std::fprintf(stderr, "create: %s\n", std::string(backend.status().message()).c_str());
    return 1;
  }
  Backend& b = **backend;
  std::printf("\n== synthetic %s: n_embd %ld, %ld layers (%ld recurrent, %ld attention), ffn %ld, vocab %ld, %s; "
              "built in %.1f s; weights read per token %.1f MiB\n",
              which.c_str(), s.n_embd, s.n_layer, s.n_rec(), s.n_attn(), s.n_ff, kVocab,
              type == GgmlType::kF32 ? "F32" : "Q8_0 matrices",
              Seconds(t_build, Clock::now()), b.info().weight_bytes / 1048576.0);

  std::vector<TokenId> tokens(static_cast<size_t>(prompt));
  for (int i = 0; i < prompt; ++i) tokens[i] = static_cast<TokenId>((i * 7919 + 1) % kVocab);
  const int32_t last_row[] = {prompt - 1};
  const int32_t row0[] = {0};

  std::unique_ptr<SequenceMemory> memory;
  base.sgemm_flops = SgemmFlops(threads, prompt);
  const double prompt_s = Best(2, [&] {
    memory = *b.NewSequence();
    SequenceRun run{memory.get(), 0, tokens, nullptr, last_row, {}};
    if (!b.Forward(std::span<const SequenceRun>(&run, 1)).ok()) std::abort();
  });
  const double prompt_flops = 2.0 * static_cast<double>(s.matrix_elems) * prompt;
  const double prompt_tps = prompt / prompt_s;
  const double prompt_roof_tps = prompt / (prompt_flops / base.sgemm_flops);

  {
    ThreadPool pool(threads);
    base.bandwidth = bench::ReadBandwidth1GiB(pool, 3);
  }
  TokenId next = 5;
  const auto t_dec = Clock::now();
  for (int i = 0; i < decode; ++i) {
    const TokenId tok[] = {next};
    SequenceRun run{memory.get(), memory->next_pos(), tok, nullptr, row0, {}};
    auto out = b.Forward(std::span<const SequenceRun>(&run, 1));
    if (!out.ok()) std::abort();
    next = static_cast<TokenId>(std::max_element((*out)[0].values.begin(), (*out)[0].values.end()) -
                                (*out)[0].values.begin());
  }
  const double decode_s = Seconds(t_dec, Clock::now()) / decode;
  const double decode_roof_s = static_cast<double>(b.info().weight_bytes) / base.bandwidth;

  // Checkpoint size beside the formula: per recurrent layer, the last
  // d_conv - 1 conv inputs and the recurrent state, F32.
  const size_t cp_bytes = memory->Bytes(SnapshotScope::kCheckpoint);
  const size_t cp_formula = static_cast<size_t>(s.n_rec() * ((s.d_conv - 1) * s.conv_channels + s.state_floats) * 4);
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
              s.n_rec(), s.d_conv, s.conv_channels, s.state_floats);
  std::printf("%-36s %14zu %14zu %7.4fx  (formula: checkpoint + %ld attention layers x 2 x %ld x 4 B x %zu rows)\n",
              "full snapshot bytes", full_bytes, cp_formula + kv_formula,
              static_cast<double>(full_bytes) / (cp_formula + kv_formula), s.n_attn(), s.n_head_kv * s.head_dim, rows);
  std::printf("%-36s %12.3f ms %11.3f ms %7.2fx  (baseline: memcpy of the same bytes into a fresh vector)\n",
              "capture one checkpoint", capture_s * 1e3, memcpy_fresh_s * 1e3, capture_s / memcpy_fresh_s);
  std::printf("%-36s %12.3f ms %11.3f ms %7.2fx  (baseline: memcpy of the same bytes into a reused buffer)\n", "restore one checkpoint",
              restore_s * 1e3, memcpy_s * 1e3, restore_s / memcpy_s);
  return 0;
}

}  // namespace

int Main(int argc, char** argv) {
  KeepFreedSnapshotMemory();
  int threads = 2, prompt = 512, decode = 16;
  std::string which = "all", types = "all";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--model" || k == "--type") {
      (k == "--model" ? which : types) = argv[i + 1];
      continue;
    }
    const int v = std::atoi(argv[i + 1]);
    if (k == "--threads") threads = v;
    else if (k == "--prompt") prompt = v;
    else if (k == "--decode") decode = v;
  }
  if (threads <= 0 || prompt <= 0 || decode <= 0 || (which != "all" && which != "qwen35" && which != "granitehybrid") ||
      (types != "all" && types != "f32" && types != "q8_0")) {
    std::fprintf(stderr, "usage: bench_forward_hybrid [--threads N] [--prompt N] [--decode N] "
                         "[--model qwen35|granitehybrid|all] [--type f32|q8_0|all]\n");
    return 2;
  }
  std::printf("%d threads; baselines measured right before each figure\n", threads);
  std::printf("reference (BENCHMARKS.md, llama.cpp bench-qwen35, same machine kind, 2 threads): F32 prompt 133/s, "
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
