// bench/forward_file: prompt and decode tokens/s of any GGUF file (or
// built-in demo model) on the backend the registry picks for it, measured
// the way `llama-bench -p P -n D -t T` measures, so that the two can run on
// the same file side by side:
//   prompt  one Forward of P tokens on a fresh sequence (logits of the last
//           row only), tokens/s;
//   decode  D Forwards of one token each on a fresh sequence from position 0
//           (llama-bench's tg runs without the prompt), tokens/s.
// Each round runs both after one untimed warm-up Forward; the medians over
// --rounds are printed. Also printed: the weight bytes the backend reads per
// forward token (ModelInfo::weight_bytes: for a mixture of experts, the
// router, the expert_used_count chosen experts and the shared expert) beside
// the bytes of all the file's tensors and of its expert tensors (*_exps),
// which is what a dense read of every expert would cost.
//
// --exact-activations runs the backend with F32 activations everywhere
// (BackendOptions::exact_activations); --vs-exact runs the default (8-bit
// activations for quantized weights) and the exact path as two backends,
// their rounds alternating, and prints the ratio of the medians.
//
//   forward_file --model PATH.gguf|NAME [--threads 2] [--prompt 512]
//                [--decode 32] [--rounds 3] [--exact-activations | --vs-exact]
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

namespace cairn {
namespace {

using bench::Clock;

struct Options {
  std::string model;
  int threads = 2;
  int prompt = 512;
  int decode = 32;
  bool exact_activations = false;
  bool vs_exact = false;
  int rounds = 3;
};

[[noreturn]] void Die(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "forward_file: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

std::unique_ptr<SequenceMemory> Fresh(Backend& b) {
  auto mem = b.NewSequence();
  if (!mem.ok()) Die("NewSequence", mem.status());
  return std::move(*mem);
}

void Run1(Backend& b, SequenceMemory& mem, std::span<const TokenId> tokens) {
  const int32_t last[] = {static_cast<int32_t>(tokens.size()) - 1};
  SequenceRun run{&mem, mem.next_pos(), tokens, nullptr, last, {}};
  if (auto out = b.Forward(std::span<const SequenceRun>(&run, 1)); !out.ok()) Die("Forward", out.status());
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
  bo.exact_activations = o.exact_activations;
  auto backend = registry.Create(*file, bo);
  if (!backend.ok()) Die(o.model, backend.status());
  Backend& b = **backend;
  // --vs-exact: the same file on the exact path, measured in the same rounds.
  std::unique_ptr<Backend> exact;
  if (o.vs_exact) {
    bo.exact_activations = true;
    auto e = registry.Create(*file, bo);
    if (!e.ok()) Die(o.model, e.status());
    exact = std::move(*e);
  }

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

  std::vector<Backend*> backends = {&b};
  if (exact) backends.push_back(exact.get());
  for (Backend* x : backends) {  // warm-up: pages the weights in, sizes the work buffers
    auto mem = Fresh(*x);
    Run1(*x, *mem, std::span<const TokenId>(prompt).first(std::min<size_t>(prompt.size(), 64)));
  }
  std::vector<std::vector<double>> pp(backends.size()), tg(backends.size());
  const char* names[] = {o.exact_activations ? "exact" : "default", "exact"};
  for (int r = 0; r < o.rounds; ++r) {
    for (size_t k = 0; k < backends.size(); ++k) {
      Backend& x = *backends[k];
      auto mem = Fresh(x);
      auto t0 = Clock::now();
      Run1(x, *mem, prompt);
      pp[k].push_back(o.prompt / bench::Since(t0));
      mem = Fresh(x);
      t0 = Clock::now();
      for (const TokenId& t : decode) Run1(x, *mem, std::span<const TokenId>(&t, 1));
      tg[k].push_back(o.decode / bench::Since(t0));
      std::printf("round %d%s%s: prompt %.2f tokens/s, decode %.2f tokens/s\n", r + 1, exact ? " " : "",
                  exact ? names[k] : "", pp[k].back(), tg[k].back());
    }
  }
  for (size_t k = 0; k < backends.size(); ++k) {
    std::printf("median of %d%s%s: prompt (pp%d) %.2f tokens/s, decode (tg%d) %.2f tokens/s\n", o.rounds,
                exact ? " " : "", exact ? names[k] : "", o.prompt, Median(pp[k]), o.decode, Median(tg[k]));
  }
  if (exact) {
    std::printf("default / exact: prompt %.2fx, decode %.2fx\n", Median(pp[0]) / Median(pp[1]),
                Median(tg[0]) / Median(tg[1]));
  }
  return 0;
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) {
  cairn::Options o;
  // The flags without a value first; the rest come in pairs.
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--exact-activations") {
      o.exact_activations = true;
    } else if (a == "--vs-exact") {
      o.vs_exact = true;
    } else {
      args.push_back(a);
    }
  }
  if (o.exact_activations && o.vs_exact) {
    std::fprintf(stderr, "forward_file: --exact-activations and --vs-exact exclude each other\n");
    return 2;
  }
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    const std::string k = args[i], v = args[i + 1];
    bool ok = true;
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
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "forward_file: bad option %s %s\n", k.c_str(), v.c_str());
      return 2;
    }
  }
  if (o.model.empty() || args.size() % 2 != 0) {
    std::fprintf(stderr,
                 "usage: forward_file --model PATH.gguf|NAME [--threads 2] [--prompt 512] [--decode 32] "
                 "[--rounds 3] [--exact-activations | --vs-exact]\n");
    return 2;
  }
  return cairn::Run(o);
}
