// The tokenizer interface: text <-> token ids for the vocabulary a GGUF file
// carries (tokenizer.ggml.*). Implementations: SPM (`llama`) and byte-level
// BPE (`gpt2`), both reproducing llama.cpp's tokenization exactly.
#ifndef CAIRN_BACKENDS_MODEL_TOKENIZER_H_
#define CAIRN_BACKENDS_MODEL_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/model/gguf.h"
#include "backends/model/metadata.h"

namespace cairn {

using TokenId = int32_t;

// GGUF `tokenizer.ggml.token_type` values.
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class TokenizerKind : uint8_t { kSpm, kBpe };

struct TokenizeOptions {
  // Add the BOS/EOS tokens the vocabulary asks for (add_bos_token /
  // add_eos_token), as llama.cpp's add_special.
  bool add_special = true;
  // Match the text of control, user-defined and unknown tokens literally
  // (rendered chat templates). When false those tokens are never produced
  // from text: "<|im_end|>" in user content is tokenized as plain text.
  // (llama.cpp matches user-defined tokens even then; cairn does not, so that
  // client text can never inject a token the template did not put there.)
  bool parse_special = false;
};

// One part of a text to tokenize as a whole (TokenizeParts).
struct TextPart {
  std::string_view text;
  // Match special tokens inside this part (template scaffolding); content
  // parts leave "<|im_end|>" and the like as plain text.
  bool parse_special = false;
};

// Special token ids; -1 when the vocabulary has none.
struct SpecialTokens {
  TokenId bos = -1;
  TokenId eos = -1;
  TokenId eot = -1;
  TokenId unk = -1;
  TokenId pad = -1;
  TokenId sep = -1;
};

// Immutable after creation; every method is thread-safe.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // The tokenizer of a model file (its metadata). Errors: NOT_FOUND when the
  // file carries no tokenizer.ggml.model / tokens, or names none ("none" or
  // "no_vocab", as llama.cpp accepts); UNIMPLEMENTED for a
  // tokenizer model or BPE pre-tokenizer (tokenizer.ggml.pre) cairn does not
  // implement (never a silent fallback); INVALID_ARGUMENT for inconsistent
  // data (wrong types, short scores/types arrays, duplicate tokens, add_bos
  // or add_eos without the token). As in llama.cpp, a missing
  // tokenizer.ggml.pre means "default", special ids outside the vocabulary
  // are ignored and merges that are not two tokens never apply.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(const ModelFile& model);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromMetadata(const Metadata& metadata);

  virtual TokenizerKind kind() const = 0;
  // tokenizer.ggml.pre for BPE ("" for SPM).
  virtual const std::string& pre_tokenizer() const = 0;

  // Tokenizes arbitrary bytes (invalid UTF-8 included); never fails.
  virtual std::vector<TokenId> Tokenize(std::string_view text, const TokenizeOptions& options = {}) const = 0;

  // Tokenizes the concatenation of `parts` exactly as Tokenize would the
  // whole text, except that special tokens are matched only inside parts
  // that ask for it (and never across a part boundary). When `part_starts`
  // is given it receives, for each part, the index in the result of the
  // token that holds the part's first byte (the next token for an empty
  // part; the first token of the enclosing text run when bytes and token
  // pieces cannot be aligned, e.g. invalid UTF-8).
  virtual std::vector<TokenId> TokenizeParts(std::span<const TextPart> parts, bool add_special,
                                             std::vector<size_t>* part_starts = nullptr) const = 0;

  // Vocabulary size; valid ids are [0, n_vocab()).
  virtual int32_t n_vocab() const = 0;
  // The token's text as stored in the vocabulary (empty for an invalid id).
  virtual std::string_view TokenText(TokenId id) const = 0;
  // kUndefined for an invalid id.
  virtual TokenType token_type(TokenId id) const = 0;
  // SPM score (0 for BPE or an invalid id).
  virtual float score(TokenId id) const = 0;
  // The id of a token with exactly this text, if any.
  virtual std::optional<TokenId> FindToken(std::string_view text) const = 0;

  // The bytes a token stands for: normal tokens decoded (SPM '▁' -> ' ',
  // BPE byte alphabet -> bytes), byte tokens <0xNN> as one byte,
  // user-defined tokens as their text, control and unknown tokens as their
  // text only when `special` is true (else empty). Not necessarily valid
  // UTF-8 on its own. Empty for an invalid id.
  virtual const std::string& TokenPiece(TokenId id, bool special) const = 0;

  virtual const SpecialTokens& special_tokens() const = 0;
  virtual bool add_bos() const = 0;
  virtual bool add_eos() const = 0;
  // SPM: a space is prepended to text at the start and after every special
  // token; detokenization removes it again.
  virtual bool add_space_prefix() const = 0;
  // End-of-generation tokens (eos, eot, <|im_end|>, <|eot_id|>, ...).
  virtual bool IsEndOfGeneration(TokenId id) const = 0;
  // Control, unknown or user-defined: tokens that only special parsing makes.
  virtual bool IsSpecial(TokenId id) const = 0;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MODEL_TOKENIZER_H_
