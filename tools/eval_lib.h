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
  int32_t chunk = 0;                                               // 0 = the whole sequence in one Forward
  static absl::StatusOr<EvalMode> Parse(const std::string& text);  // batch | step | chunk:N
};

// Runs `tokens` through a fresh sequence of `backend` and returns the logits
// of every position.
absl::StatusOr<SequenceLogits> EvalSequence(Backend& backend, const std::vector<TokenId>& tokens, EvalMode mode);
// EvalSequence for each of `seqs`, in order; the first error.
absl::StatusOr<std::vector<SequenceLogits>> EvalSequences(Backend& backend,
                                                          const std::vector<std::vector<TokenId>>& seqs, EvalMode mode);

// Greedy continuation: `n` new ids after `prompt` (argmax, lowest id wins ties).
absl::StatusOr<std::vector<TokenId>> GenerateGreedy(Backend& backend, const std::vector<TokenId>& prompt, int32_t n);

// A multimodal prompt in the golden/multimodal format: parts in order, each
// a text run ("T id ...") or an image chunk of nx * ny embedding rows
// ("I nx ny") taken in order from an embeddings file (raw float32 rows of
// n_embd). INVALID_ARGUMENT naming the line for anything else; NOT_FOUND
// when the file cannot be opened.
struct PromptPart {
  std::vector<TokenId> tokens;  // text run; empty for a chunk
  int32_t nx = 0, ny = 0;       // chunk grid
  int64_t first_row = 0;        // chunk: index of its first embedding row
};
absl::StatusOr<std::vector<PromptPart>> ReadMultimodalSpec(const std::string& path);
// Raw float32 rows of `n_embd`; INVALID_ARGUMENT when the size is not a
// whole number of rows.
absl::StatusOr<std::vector<float>> ReadEmbeddingsFile(const std::string& path, int32_t n_embd);

// Feeds each part as its own Forward on a fresh sequence and returns the
// logits of every row, text and image, in order. INVALID_ARGUMENT when the
// chunks need more rows than `embeddings` holds; Forward's errors otherwise.
absl::StatusOr<SequenceLogits> EvalMultimodal(Backend& backend, const std::vector<PromptPart>& parts,
                                              const std::vector<float>& embeddings);

struct LogitsComparison {
  double max_abs_diff = 0;  // max |a - b| over all rows and entries
  double ref_std = 0;       // standard deviation of all reference logits
  double max_rel = 0;       // max_abs_diff / ref_std
  int64_t rows = 0;
  int64_t argmax_agree = 0;  // rows whose argmax is the same
  // Rows whose argmax differs but whose reference holds the two tokens within
  // kNearTieFraction x ref_std of each other: a tie that any rounding decides.
  int64_t argmax_near_tie = 0;
};
// 8-bit activations (the fast path) round differently per batch shape (AVX2
// prompt panels vs one-row kernels): on qwen35moe-Q8_0, whose router picks
// experts from close scores, a whole-prompt run and token-by-token runs pick
// tokens 0.022 x std apart in the reference (the fast path's tolerance on the
// logits themselves is 1.5 x std).
inline constexpr double kNearTieFraction = 0.05;
// INVALID_ARGUMENT when the shapes differ.
absl::StatusOr<LogitsComparison> CompareLogits(const SequenceLogits& got, const SequenceLogits& ref);
// Aggregate over sequences (std over all reference values together).
absl::StatusOr<LogitsComparison> CompareAll(const std::vector<SequenceLogits>& got,
                                            const std::vector<SequenceLogits>& ref);

int32_t Argmax(const float* v, int32_t n);

}  // namespace cairn

#endif  // CAIRN_TOOLS_EVAL_LIB_H_
