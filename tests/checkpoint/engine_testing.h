// Helpers for tests of the checkpoint engine over real backends: loading a
// golden model through the registry, computing a prompt from scratch on a
// fresh sequence (the reference), and measuring deviations.
#ifndef CAIRN_TESTS_CHECKPOINT_ENGINE_TESTING_H_
#define CAIRN_TESTS_CHECKPOINT_ENGINE_TESTING_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/backend.h"
#include "backends/register_builtin.h"
#include "checkpoint/prompt.h"
#include "tests/testing/shared_data.h"

namespace cairn::checkpoint::testing {

// The backend for a model under ../shared through the registry; NOT_FOUND
// when its family is not registered (yet). `exact_activations`: F32
// activations everywhere (the golden tolerance holds), or the default fast
// path (8-bit activations for quantized weights).
inline absl::StatusOr<std::unique_ptr<Backend>> LoadBackend(const std::string& relative,
                                                            bool exact_activations = true) {
  static BackendRegistry* registry = [] {
    auto* r = new BackendRegistry();
    absl::Status s = RegisterBuiltinBackends(*r);
    (void)s;
    return r;
  }();
  auto model = ModelFile::Open(::cairn::testing::TestDataPath(relative));
  if (!model.ok()) return model.status();
  absl::StatusOr<std::string> arch = (*model)->Architecture();
  if (!arch.ok()) return arch.status();
  if (!registry->FamilyForArch(*arch).ok()) {
    return absl::NotFoundError("no family registered for arch " + *arch);
  }
  BackendOptions options;
  options.n_threads = 1;  // tests run beside others on 2 cores
  options.exact_activations = exact_activations;
  return registry->Create(std::shared_ptr<const ModelFile>(std::move(*model)), options);
}

// The reference: the whole prompt on a fresh sequence, one Forward per run
// of tokens (chunks alone), logits of the last row.
inline absl::StatusOr<std::vector<float>> FreshLogits(Backend& backend, const Prompt& prompt) {
  auto seq = backend.NewSequence();
  if (!seq.ok()) return seq.status();
  std::vector<float> logits;
  size_t i = 0;
  std::vector<TokenId> tokens;
  while (i < prompt.size()) {
    size_t end = i + 1;
    SequenceRun run;
    run.memory = seq->get();
    run.start_pos = (*seq)->next_pos();
    int32_t rows = 1;
    if (prompt.is_chunk(i)) {
      run.chunk = &prompt.chunk(i);
      rows = run.chunk->n_rows();
    } else {
      while (end < prompt.size() && !prompt.is_chunk(end)) ++end;
      tokens.clear();
      for (size_t k = i; k < end; ++k) tokens.push_back(prompt.token(k));
      run.tokens = tokens;
      rows = static_cast<int32_t>(tokens.size());
    }
    const int32_t last = rows - 1;
    if (end == prompt.size()) run.logit_rows = std::span<const int32_t>(&last, 1);
    auto out = backend.Forward(std::span<const SequenceRun>(&run, 1));
    if (!out.ok()) return out.status();
    if (end == prompt.size()) {
      auto row = (*out)[0].row(0);
      logits.assign(row.begin(), row.end());
    }
    i = end;
  }
  return logits;
}

// max |a - b| / std(b): the golden README's measure.
inline double Deviation(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || b.empty()) return INFINITY;
  double mean = 0;
  for (float v : b) mean += v;
  mean /= b.size();
  double var = 0;
  for (float v : b) var += (v - mean) * (v - mean);
  const double sd = std::sqrt(var / b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double{a[i]} - b[i]));
  return sd > 0 ? worst / sd : worst;
}

inline size_t Argmax(const std::vector<float>& v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Forwards to a real backend and sets `flag` when the Forward call numbered
// `cancel_at` (1-based, counted from Arm) starts: a way to cancel a prompt
// midway. Not a fake: every computation is the real backend's.
class CancellingBackend final : public Backend {
 public:
  explicit CancellingBackend(Backend* real) : real_(real) {}
  const ModelInfo& info() const override { return real_->info(); }
  absl::StatusOr<std::unique_ptr<SequenceMemory>> NewSequence() override { return real_->NewSequence(); }
  absl::StatusOr<std::vector<RunLogits>> Forward(std::span<const SequenceRun> batch) override {
    ++calls_;
    if (cancel_at_ > 0 && --cancel_at_ == 0) flag_.store(true);
    return real_->Forward(batch);
  }
  void Arm(int cancel_at) {
    flag_.store(false);
    cancel_at_ = cancel_at;
  }
  void Disarm() {
    flag_.store(false);
    cancel_at_ = 0;
  }
  const std::atomic<bool>* flag() const { return &flag_; }
  int calls() const { return calls_; }

 private:
  Backend* real_;
  std::atomic<bool> flag_{false};
  int cancel_at_ = 0;
  int calls_ = 0;
};

}  // namespace cairn::checkpoint::testing

#endif  // CAIRN_TESTS_CHECKPOINT_ENGINE_TESTING_H_
