#include "bench/file_speed.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "backends/backend.h"
#include "backends/model/ggml_type.h"
#include "backends/register_builtin.h"
#include "bench/bench_util.h"
#include "service/programs/demo_models.h"

namespace cairn::bench {
namespace {

struct Options {
  std::string model;
  int threads = 2;
  int prompt = 512;
  int decode = 32;
  int rounds = 3;
  int batch = 1;
  // F32 activations everywhere (BackendOptions::exact_activations).
  bool exact_activations = false;
  // Also the exact path as a second backend, rounds alternating.
  bool vs_exact = false;
  // Also the file's rows unpacked (BackendOptions::pack_weights false) as a
  // second backend, rounds alternating; or only them.
  bool vs_rows = false;
  bool no_pack_weights = false;
};

using Memories = std::vector<std::unique_ptr<SequenceMemory>>;

Memories Fresh(Backend& b, int n) {
  Memories mems;
  for (int i = 0; i < n; ++i) {
    auto mem = b.NewSequence();
    if (!mem.ok()) Die("NewSequence", mem.status());
    mems.push_back(std::move(*mem));
  }
  return mems;
}

// One Forward: runs[i] feeds `tokens` to mems[i], logits of its last row.
void Step(Backend& b, Memories& mems, std::span<const TokenId> tokens) {
  const int32_t last[] = {static_cast<int32_t>(tokens.size()) - 1};
  std::vector<SequenceRun> runs;
  for (auto& mem : mems) runs.push_back(SequenceRun{mem.get(), mem->next_pos(), tokens, nullptr, last, {}});
  if (auto out = b.Forward(runs); !out.ok()) Die("Forward", out.status());
}

// Tokens/s of `decode.size()` steps of one token for `n` fresh sequences.
double DecodeTokensPerSecond(Backend& b, int n, const std::vector<TokenId>& decode) {
  Memories mems = Fresh(b, n);
  const auto t0 = Clock::now();
  for (const TokenId& t : decode) Step(b, mems, std::span<const TokenId>(&t, 1));
  return static_cast<double>(n) * decode.size() / Since(t0);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The medians of one backend's rounds.
struct Speeds {
  std::vector<double> pp, tg, batched;
};

void Round(Backend& b, const Options& o, const std::vector<TokenId>& prompt, const std::vector<TokenId>& decode,
           Speeds* s) {
  Memories mem = Fresh(b, 1);
  const auto t0 = Clock::now();
  Step(b, mem, prompt);
  s->pp.push_back(o.prompt / Since(t0));
  s->tg.push_back(DecodeTokensPerSecond(b, 1, decode));
  std::printf("prompt %.2f tokens/s, decode %.2f tokens/s", s->pp.back(), s->tg.back());
  if (o.batch > 1) {
    s->batched.push_back(DecodeTokensPerSecond(b, o.batch, decode));
    std::printf(", decode of %d sequences %.2f tokens/s total", o.batch, s->batched.back());
  }
  std::printf("\n");
}

void PrintMedians(const Options& o, const char* label, const Speeds& s) {
  std::printf("median of %d%s: prompt (pp%d) %.2f tokens/s, decode (tg%d) %.2f tokens/s", o.rounds, label, o.prompt,
              Median(s.pp), o.decode, Median(s.tg));
  if (o.batch > 1) {
    std::printf(", decode of %d sequences %.2f tokens/s total (%.2fx one sequence)", o.batch, Median(s.batched),
                Median(s.batched) / Median(s.tg));
  }
  std::printf("\n");
}

// The prompt's weight products against the F32 FMA ceiling: 2 x matrix
// elements x tokens/s (experts left out: a token reads only its chosen
// ones; attention's own products not counted). For F32 weights, how close
// to the machine's arithmetic limit the prompt runs, which bounds any
// speed-up over another engine: it cannot beat 100%. Not printed for
// quantized weights (integer products, which that peak does not bound).
void PrintPeakShare(const ModelFile& file, const Options& o, double prompt_tokens_per_s) {
  double elements = 0;
  bool has_output = false;
  for (const TensorInfo* t : file.tensors()) {
    if (t->shape.size() != 2 || absl::StrContains(t->name, "_exps.")) continue;
    if (Traits(t->type).block_size != 1) return;  // quantized: only plain floats come in blocks of one
    if (t->name == "output.weight") has_output = true;
    if (t->name != "token_embd.weight") elements += static_cast<double>(t->n_elements());
  }
  if (!has_output) {
    if (const TensorInfo* e = file.FindTensor("token_embd.weight")) elements += static_cast<double>(e->n_elements());
  }
  ThreadPool pool(o.threads);
  const double peak = FmaPeakFlops(pool, 3), flops = 2 * elements * prompt_tokens_per_s;
  std::printf("prompt weight products %.1f GFLOP/s = %.0f%% of the F32 FMA peak (%.1f GFLOP/s on %d threads)\n",
              flops / 1e9, 100 * flops / peak, peak / 1e9, o.threads);
}

int Run(const Options& o) {
  auto file = service::OpenModelOrDemo(o.model);
  if (!file.ok()) Die(o.model, file.status());
  BackendRegistry registry;
  if (absl::Status s = RegisterBuiltinBackends(registry); !s.ok()) Die("registry", s);
  BackendOptions bo;
  bo.n_threads = o.threads;
  bo.exact_activations = o.exact_activations;
  bo.pack_weights = !o.no_pack_weights;
  auto backend = registry.Create(*file, bo);
  if (!backend.ok()) Die(o.model, backend.status());
  Backend& b = **backend;
  std::unique_ptr<Backend> other;  // --vs-exact or --vs-rows
  if (o.vs_exact || o.vs_rows) {
    bo.exact_activations = o.vs_exact;
    bo.pack_weights = !o.vs_rows;
    auto e = registry.Create(*file, bo);
    if (!e.ok()) Die(o.model, e.status());
    other = std::move(*e);
  }

  size_t file_bytes = 0, expert_bytes = 0;
  for (const TensorInfo* t : (*file)->tensors()) {
    file_bytes += t->n_bytes;
    if (absl::StrContains(t->name, "_exps.")) expert_bytes += t->n_bytes;
  }
  std::printf("%s: %s (%s family), %d threads, %s activations\n", o.model.c_str(), b.info().arch.c_str(),
              b.info().family.c_str(), o.threads,
              o.exact_activations ? "exact (F32)"
              : o.no_pack_weights ? "default, file rows"
                                  : "default");
  std::printf("weights read per forward token %.1f MiB; file tensors %.1f MiB, of which experts (*_exps) %.1f MiB\n",
              b.info().weight_bytes / 1048576.0, file_bytes / 1048576.0, expert_bytes / 1048576.0);

  const int32_t n_vocab = b.info().n_vocab;
  std::vector<TokenId> prompt(static_cast<size_t>(o.prompt)), decode(static_cast<size_t>(o.decode));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<TokenId>((i * 7919 + 1) % n_vocab);
  for (size_t i = 0; i < decode.size(); ++i) decode[i] = static_cast<TokenId>((i * 104729 + 3) % n_vocab);

  std::vector<Backend*> backends = {&b};
  if (other != nullptr) backends.push_back(other.get());
  for (Backend* x : backends) {  // warm-up: pages the weights in, sizes the work buffers
    Memories mem = Fresh(*x, 1);
    Step(*x, mem, std::span<const TokenId>(prompt).first(std::min<size_t>(prompt.size(), 64)));
  }
  const char* labels[] = {"", o.vs_exact ? " exact" : " rows"};
  std::vector<Speeds> speeds(backends.size());
  for (int r = 0; r < o.rounds; ++r) {
    for (size_t k = 0; k < backends.size(); ++k) {
      std::printf("round %d%s: ", r + 1, labels[k]);
      Round(*backends[k], o, prompt, decode, &speeds[k]);
    }
  }
  if (other != nullptr) {
    PrintMedians(o, labels[1], speeds[1]);
    std::printf("default / %s: prompt %.2fx, decode %.2fx\n", labels[1] + 1,
                Median(speeds[0].pp) / Median(speeds[1].pp), Median(speeds[0].tg) / Median(speeds[1].tg));
  }
  PrintPeakShare(**file, o, Median(speeds[0].pp));
  // Last: the line scripts read (bench/vs_llamacpp.sh).
  PrintMedians(o, labels[0], speeds[0]);
  return 0;
}

}  // namespace

int FileSpeedMain(int argc, char** argv, const char* program) {
  Options o;
  bool ok = true;
  for (int i = 1; ok && i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--exact-activations") {
      o.exact_activations = true;
      continue;
    }
    if (k == "--vs-exact") {
      o.vs_exact = true;
      continue;
    }
    if (k == "--vs-rows") {
      o.vs_rows = true;
      continue;
    }
    if (k == "--no-pack-weights") {
      o.no_pack_weights = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s: %s needs a value\n", program, k.c_str());
      ok = false;
      break;
    }
    const std::string v = argv[++i];
    if (k == "--model") {
      o.model = v;
    } else if (k == "--threads") {
      ok = absl::SimpleAtoi(v, &o.threads) && o.threads > 0;
    } else if (k == "--prompt") {
      ok = absl::SimpleAtoi(v, &o.prompt) && o.prompt > 0;
    } else if (k == "--decode") {
      ok = absl::SimpleAtoi(v, &o.decode) && o.decode > 0;
    } else if (k == "--rounds") {
      ok = absl::SimpleAtoi(v, &o.rounds) && o.rounds > 0;
    } else if (k == "--batch") {
      ok = absl::SimpleAtoi(v, &o.batch) && o.batch > 0;
    } else {
      ok = false;
    }
    if (!ok) std::fprintf(stderr, "%s: bad option %s %s\n", program, k.c_str(), v.c_str());
  }
  if (o.exact_activations + o.vs_exact + o.vs_rows + o.no_pack_weights > 1) {
    std::fprintf(stderr, "%s: --exact-activations, --vs-exact, --vs-rows and --no-pack-weights exclude each other\n",
                 program);
    ok = false;
  }
  if (!ok || o.model.empty()) {
    std::fprintf(stderr,
                 "usage: %s --model PATH.gguf|NAME [--threads 2] [--prompt 512] [--decode 32] [--rounds 3] "
                 "[--batch 1] [--exact-activations | --vs-exact | --vs-rows | --no-pack-weights]\n",
                 program);
    return 2;
  }
  return Run(o);
}

}  // namespace cairn::bench
