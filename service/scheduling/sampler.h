// Token sampling: penalties, temperature, top-k, top-p, min-p, seeded RNG,
// and log-probabilities. Pure computation on one logits row; no model access.
#ifndef CAIRN_SERVICE_SCHEDULING_SAMPLER_H_
#define CAIRN_SERVICE_SCHEDULING_SAMPLER_H_

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/memory.h"

namespace cairn::service {

struct SamplingConfig {
  float temperature = 0.8f;         // 0: greedy
  int32_t top_k = 0;                // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // 1: off
  float presence_penalty = 0.0f;    // 0: off
  int32_t penalty_last_n = 64;      // -1: whole sequence; 0: penalties off
  uint64_t seed = 0;
  int32_t top_logprobs = 0;  // 0..20
  bool logprobs = false;

  // INVALID_ARGUMENT naming the first parameter out of its documented range
  // (see SamplingParams in inference.proto).
  absl::Status Validate() const;
};

struct SampledToken {
  TokenId id = 0;
  float logprob = 0;                           // with logprobs
  std::vector<std::pair<TokenId, float>> top;  // with top_logprobs
};

// One per request: owns the RNG and the penalty window. Not thread-safe.
class Sampler final {
 public:
  explicit Sampler(const SamplingConfig& config);

  // Tokens the penalties look at (the prompt's tokens, then each sampled
  // token is added by Sample itself).
  void AddHistory(std::span<const TokenId> tokens);

  // Picks the next token from `logits` (n_vocab values; left unchanged).
  // INVALID_ARGUMENT for an empty row; INTERNAL for a row with a NaN (a
  // corrupt weight or an overflow upstream: any token picked from it would
  // be noise presented as the model's reply).
  absl::StatusOr<SampledToken> Sample(std::span<const float> logits);

 private:
  // Whether the repetition or presence penalty changes anything; then
  // ApplyPenalties applies them to work_.
  bool Penalized() const;
  void ApplyPenalties();
  // A token drawn from work_ at the temperature, within top-k, min-p, top-p.
  TokenId Draw();

  SamplingConfig config_;
  std::mt19937_64 rng_;
  std::vector<TokenId> history_;
  std::vector<float> work_;
  std::vector<int32_t> index_;
};

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_SCHEDULING_SAMPLER_H_
