// Shared by cairn-eval, the golden tests and the conformance suite: the
// golden token/logit file formats, running a sequence through any Backend in
// batch/step/chunk mode, and comparing logits against a reference.
#ifndef CAIRN_TOOLS_EVAL_LIB_H_
#define CAIRN_TOOLS_EVAL_LIB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/backend.h"

namespace cairn {

// Logits of one sequence: row t = logits after token t.
struct SequenceLogits {
  int32_t n_tokens = 0;
  int32_t n_vocab = 0;
  std::vector<float> values;  // [n_tokens][n_vocab]
  const float* row(int32_t t) const { return values.data() + static_cast<size_t>(t) * n_vocab; }
};

// One sequence per line, space-separated ids. INVALID_ARGUMENT naming the
// line for anything else; NOT_FOUND when the file cannot be opened.
absl::StatusOr<std::vector<std::vector<TokenId>>> ReadTokenFile(const std::string& path);
absl::StatusOr<std::vector<TokenId>> ParseTokenList(const std::string& text);

// Per sequence: int32 n_tokens, int32 n_vocab, float32[n_tokens][n_vocab].
absl::StatusOr<std::vector<SequenceLogits>> ReadLogitsFile(const std::string& path);
absl::Status WriteLogitsFile(const std::string& path, const std::vector<SequenceLogits>& seqs);

// How a sequence is fed: all at once, one token per Forward, or pieces of N.
struct EvalMode {
  int32_t chunk = 0;  // 0 = the whole sequence in one Forward
  static absl::StatusOr<EvalMode> Parse(const std::string& text);  // batch | step | chunk:N
};

// Runs `tokens` through a fresh sequence of `backend` and returns the logits
// of every position.
absl::StatusOr<SequenceLogits> EvalSequence(Backend& backend, const std::vector<TokenId>& tokens, EvalMode mode);

// Greedy continuation: `n` new ids after `prompt` (argmax, lowest id wins ties).
absl::StatusOr<std::vector<TokenId>> GenerateGreedy(Backend& backend, const std::vector<TokenId>& prompt, int32_t n);

struct LogitsComparison {
  double max_abs_diff = 0;   // max |a - b| over all rows and entries
  double ref_std = 0;        // standard deviation of all reference logits
  double max_rel = 0;        // max_abs_diff / ref_std
  int64_t rows = 0;
  int64_t argmax_agree = 0;  // rows whose argmax is the same
};
// INVALID_ARGUMENT when the shapes differ.
absl::StatusOr<LogitsComparison> CompareLogits(const SequenceLogits& got, const SequenceLogits& ref);
// Aggregate over sequences (std over all reference values together).
absl::StatusOr<LogitsComparison> CompareAll(const std::vector<SequenceLogits>& got,
                                            const std::vector<SequenceLogits>& ref);

int32_t Argmax(const float* v, int32_t n);

}  // namespace cairn

#endif  // CAIRN_TOOLS_EVAL_LIB_H_
