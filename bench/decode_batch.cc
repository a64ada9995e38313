// bench/decode_batch: what continuous batching gains at the backend, without
// the service around it. One decode step is one Forward with one new token per
// sequence; the figure is the aggregate tokens/s of N sequences stepped
// together against one sequence stepped alone, on the same backend in the
// same run. The two alternate in short rounds (the machine's speed drifts on
// shared hosts) and each reports its median step time.
//
//   decode_batch [--model demo-hybrid-large|NAME|PATH.gguf] [--sequences 8,16]
//                [--rounds 15] [--steps 20] [--threads 2] [--context 64]
//                [--exact-activations]
//
// NAME is any built-in demo model; --context is the prompt each sequence
// holds before the timed steps.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "backends/backend.h"
#include "backends/register_builtin.h"
#include "bench/bench_util.h"
#include "service/programs/demo_models.h"

namespace cairn {
namespace {

using bench::Clock;

struct Options {
  std::string model = "demo-hybrid-large";
  std::vector<int> sequences = {8, 16};
  int rounds = 15;
  int steps = 20;
  int threads = 2;
  int context = 64;
  bool exact_activations = false;  // BackendOptions::exact_activations
};

std::vector<std::unique_ptr<SequenceMemory>> Prefilled(Backend& b, int n, int context) {
  std::vector<std::unique_ptr<SequenceMemory>> mems;
  const int32_t n_vocab = b.info().n_vocab;
  for (int s = 0; s < n; ++s) {
    std::vector<TokenId> prompt(static_cast<size_t>(context));
    for (int i = 0; i < context; ++i) prompt[i] = static_cast<TokenId>((s * 131 + i * 7919 + 1) % n_vocab);
    const int32_t last[] = {context - 1};
    auto mem = b.NewSequence();
    if (!mem.ok()) {
      std::fprintf(stderr, "decode_batch: %s\n", mem.status().ToString().c_str());
      std::exit(1);
    }
    SequenceRun run{mem->get(), 0, prompt, nullptr, last, {}};
    if (auto out = b.Forward(std::span<const SequenceRun>(&run, 1)); !out.ok()) {
      std::fprintf(stderr, "decode_batch: %s\n", out.status().ToString().c_str());
      std::exit(1);
    }
    mems.push_back(std::move(*mem));
  }
  return mems;
}

// Seconds per decode step of all `mems` together, averaged over `steps`.
double StepSeconds(Backend& b, std::vector<std::unique_ptr<SequenceMemory>>& mems, int steps) {
  const size_t n = mems.size();
  std::vector<TokenId> next(n);
  for (size_t s = 0; s < n; ++s) next[s] = static_cast<TokenId>((s * 17 + 3) % b.info().n_vocab);
  static const int32_t kRow0[] = {0};
  const auto t0 = Clock::now();
  for (int step = 0; step < steps; ++step) {
    std::vector<SequenceRun> runs(n);
    for (size_t s = 0; s < n; ++s) {
      runs[s] =
          SequenceRun{mems[s].get(), mems[s]->next_pos(), std::span<const TokenId>(&next[s], 1), nullptr, kRow0, {}};
    }
    auto out = b.Forward(runs);
    if (!out.ok()) {
      std::fprintf(stderr, "decode_batch: %s\n", out.status().ToString().c_str());
      std::exit(1);
    }
    for (size_t s = 0; s < n; ++s) {
      const std::vector<float>& v = (*out)[s].values;
      next[s] = static_cast<TokenId>(std::max_element(v.begin(), v.end()) - v.begin());
    }
  }
  return bench::Since(t0) / steps;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Run(const Options& o) {
  auto file = service::OpenModelOrDemo(o.model);
  if (!file.ok()) {
    std::fprintf(stderr, "decode_batch: %s\n", file.status().ToString().c_str());
    return 1;
  }
  BackendRegistry registry;
  if (absl::Status s = RegisterBuiltinBackends(registry); !s.ok()) return 1;
  BackendOptions bo;
  bo.n_threads = o.threads;
  bo.exact_activations = o.exact_activations;
  auto backend = registry.Create(*file, bo);
  if (!backend.ok()) {
    std::fprintf(stderr, "decode_batch: %s\n", backend.status().ToString().c_str());
    return 1;
  }
  Backend& b = **backend;
  std::printf("%s (%s, %s family): %.1f MiB of weights read per step, %d threads, %d rounds of %d steps\n",
              o.model.c_str(), b.info().arch.c_str(), b.info().family.c_str(), b.info().weight_bytes / 1048576.0,
              o.threads, o.rounds, o.steps);

  std::vector<double> one;
  std::vector<std::vector<double>> many(o.sequences.size());
  for (int round = 0; round < o.rounds; ++round) {
    // Fresh sequences each round keep the context length the same.
    auto single = Prefilled(b, 1, o.context);
    one.push_back(StepSeconds(b, single, o.steps));
    for (size_t i = 0; i < o.sequences.size(); ++i) {
      auto batch = Prefilled(b, o.sequences[i], o.context);
      many[i].push_back(StepSeconds(b, batch, o.steps));
    }
  }
  const double t1 = Median(one);
  std::printf("%-12s %12s %14s %10s\n", "sequences", "ms/step", "tokens/s", "gain");
  std::printf("%-12d %12.3f %14.1f %9.2fx   (baseline)\n", 1, t1 * 1e3, 1.0 / t1, 1.0);
  for (size_t i = 0; i < o.sequences.size(); ++i) {
    const double tn = Median(many[i]);
    const int n = o.sequences[i];
    std::printf("%-12d %12.3f %14.1f %9.2fx\n", n, tn * 1e3, n / tn, n * t1 / tn);
  }
  return 0;
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) {
  cairn::Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--exact-activations") {  // the one flag without a value
      o.exact_activations = true;
      --i;
      continue;
    }
    const std::string v = i + 1 < argc ? argv[i + 1] : "";
    bool ok = i + 1 < argc;
    if (ok && k == "--model") {
      o.model = v;
    } else if (ok && k == "--sequences") {
      o.sequences.clear();
      for (absl::string_view part : absl::StrSplit(v, ',')) {
        int n = 0;
        ok = ok && absl::SimpleAtoi(part, &n) && n > 0;
        o.sequences.push_back(n);
      }
    } else if (ok && k == "--rounds") {
      ok = absl::SimpleAtoi(v, &o.rounds) && o.rounds > 0;
    } else if (ok && k == "--steps") {
      ok = absl::SimpleAtoi(v, &o.steps) && o.steps > 0;
    } else if (ok && k == "--threads") {
      ok = absl::SimpleAtoi(v, &o.threads) && o.threads > 0;
    } else if (ok && k == "--context") {
      ok = absl::SimpleAtoi(v, &o.context) && o.context > 0;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: decode_batch [--model demo-hybrid-large|NAME|PATH.gguf] [--sequences 8,16] "
                   "[--rounds 15] [--steps 20] [--threads 2] [--context 64] [--exact-activations]\n");
      return 2;
    }
  }
  return cairn::Run(o);
}
