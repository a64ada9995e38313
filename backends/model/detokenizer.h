// Streaming detokenization: token ids in, text out, one token at a time.
#ifndef CAIRN_BACKENDS_MODEL_DETOKENIZER_H_
#define CAIRN_BACKENDS_MODEL_DETOKENIZER_H_

#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/model/tokenizer.h"

namespace cairn {

struct DetokenizeOptions {
  // Render control and unknown tokens as their text (e.g. "<|im_end|>");
  // otherwise they produce nothing. User-defined tokens always render.
  bool render_special = false;
  // Remove the space SPM tokenization prepends at the start and after each
  // special token (add_space_prefix), so that text round-trips.
  bool strip_space_prefix = true;
};

// Turns a stream of token ids into text that is always valid UTF-8: a token
// that ends inside a multi-byte character (byte tokens <0xNN>, BPE tokens
// holding part of a character) contributes nothing until the character is
// complete; bytes that cannot become valid UTF-8 are replaced by U+FFFD (one
// per maximal invalid subsequence). Concatenating everything Push and Flush
// append gives the text of the whole sequence.
//
// Not thread-safe: one object per sequence. The tokenizer must outlive it.
class StreamingDetokenizer final {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, DetokenizeOptions options = {});

  // Appends to `*out` the text that `id` completes (possibly nothing).
  // INVALID_ARGUMENT for an id outside the vocabulary; the state is then
  // unchanged.
  absl::Status Push(TokenId id, std::string* out);

  // Ends the stream: held-back bytes of an unfinished character become
  // U+FFFD in `*out`, and the object is ready for a new sequence.
  void Flush(std::string* out);

  // Forgets the held-back bytes and the space-prefix state.
  void Reset();

  // Bytes held back waiting for the rest of a character (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  // Moves the complete (or definitely invalid) prefix of pending_ to *out.
  void Drain(std::string* out, bool final);

  const Tokenizer& tokenizer_;
  DetokenizeOptions options_;
  std::string pending_;
  bool strip_space_;
};

// The text of a whole id sequence (a StreamingDetokenizer run to the end).
absl::StatusOr<std::string> Detokenize(const Tokenizer& tokenizer, std::span<const TokenId> ids,
                                       DetokenizeOptions options = {});

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MODEL_DETOKENIZER_H_
