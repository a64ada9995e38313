#include "bench/file_speed.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "backends/backend.h"
#include "backends/register_builtin.h"
#include "bench/bench_util.h"
#include "service/demo_models.h"

namespace cairn::bench {
namespace {

struct Options {
  std::string model;
  int threads = 2;
  int prompt = 512;
  int decode = 32;
  int rounds = 3;
  int batch = 1;
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

int Run(const Options& o) {
  auto file = service::OpenModelOrDemo(o.model);
  if (!file.ok()) Die(o.model, file.status());
  BackendRegistry registry;
  if (absl::Status s = RegisterBuiltinBackends(registry); !s.ok()) Die("registry", s);
  BackendOptions bo;
  bo.n_threads = o.threads;
  auto backend = registry.Create(*file, bo);
  if (!backend.ok()) Die(o.model, backend.status());
  Backend& b = **backend;

  size_t file_bytes = 0, expert_bytes = 0;
  for (const TensorInfo* t : (*file)->tensors()) {
    file_bytes += t->n_bytes;
    if (absl::StrContains(t->name, "_exps.")) expert_bytes += t->n_bytes;
  }
  std::printf("%s: %s (%s family), %d threads\n", o.model.c_str(), b.info().arch.c_str(), b.info().family.c_str(),
              o.threads);
  std::printf("weights read per forward token %.1f MiB; file tensors %.1f MiB, of which experts (*_exps) %.1f MiB\n",
              b.info().weight_bytes / 1048576.0, file_bytes / 1048576.0, expert_bytes / 1048576.0);

  const int32_t n_vocab = b.info().n_vocab;
  std::vector<TokenId> prompt(static_cast<size_t>(o.prompt)), decode(static_cast<size_t>(o.decode));
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<TokenId>((i * 7919 + 1) % n_vocab);
  for (size_t i = 0; i < decode.size(); ++i) decode[i] = static_cast<TokenId>((i * 104729 + 3) % n_vocab);

  {  // warm-up: pages the weights in, sizes the work buffers
    Memories mem = Fresh(b, 1);
    Step(b, mem, std::span<const TokenId>(prompt).first(std::min<size_t>(prompt.size(), 64)));
  }
  std::vector<double> pp, tg, batched;
  for (int r = 0; r < o.rounds; ++r) {
    Memories mem = Fresh(b, 1);
    const auto t0 = Clock::now();
    Step(b, mem, prompt);
    pp.push_back(o.prompt / Since(t0));
    tg.push_back(DecodeTokensPerSecond(b, 1, decode));
    std::printf("round %d: prompt %.2f tokens/s, decode %.2f tokens/s", r + 1, pp.back(), tg.back());
    if (o.batch > 1) {
      batched.push_back(DecodeTokensPerSecond(b, o.batch, decode));
      std::printf(", decode of %d sequences %.2f tokens/s total", o.batch, batched.back());
    }
    std::printf("\n");
  }
  std::printf("median of %d: prompt (pp%d) %.2f tokens/s, decode (tg%d) %.2f tokens/s", o.rounds, o.prompt,
              Median(pp), o.decode, Median(tg));
  if (o.batch > 1) {
    std::printf(", decode of %d sequences %.2f tokens/s total (%.2fx one sequence)", o.batch, Median(batched),
                Median(batched) / Median(tg));
  }
  std::printf("\n");
  return 0;
}

}  // namespace

int FileSpeedMain(int argc, char** argv, const char* program) {
  Options o;
  bool ok = argc % 2 == 1;  // flag-value pairs
  for (int i = 1; ok && i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
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
  if (!ok || o.model.empty()) {
    std::fprintf(stderr,
                 "usage: %s --model PATH.gguf|NAME [--threads 2] [--prompt 512] [--decode 32] [--rounds 3] "
                 "[--batch 1]\n",
                 program);
    return 2;
  }
  return Run(o);
}

}  // namespace cairn::bench
