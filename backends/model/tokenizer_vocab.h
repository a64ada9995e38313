// Internal to the tokenizer library: the vocabulary shared by the SPM and BPE
// tokenizers (tokens, types, scores, special ids, the special-token
// partition, the decoded pieces) and the base class holding it.
#ifndef CAIRN_BACKENDS_MODEL_TOKENIZER_VOCAB_H_
#define CAIRN_BACKENDS_MODEL_TOKENIZER_VOCAB_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "backends/model/metadata.h"
#include "backends/model/tokenizer.h"

namespace cairn::tokenizer_internal {

struct Vocab {
  std::string model;  // tokenizer.ggml.model
  std::string pre;    // tokenizer.ggml.pre (BPE)
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<TokenType> types;
  absl::flat_hash_map<std::string_view, TokenId> ids;  // views into `tokens`
  SpecialTokens special;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;
  absl::flat_hash_set<TokenId> end_of_generation;
  // Control, user-defined and unknown tokens, longest text first (ties by id):
  // the order in which the special-token partition looks for them.
  std::vector<TokenId> special_by_length;
  // TokenPiece(id, true) for every id.
  std::vector<std::string> pieces;

  std::optional<TokenId> Find(std::string_view text) const {
    auto it = ids.find(text);
    if (it == ids.end()) return std::nullopt;
    return it->second;
  }
  bool IsSpecial(TokenId id) const {
    const TokenType t = types[id];
    return t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown;
  }
};

// Reads the kind-independent part of the vocabulary. `kind` selects the
// defaults (SPM: bos 1, eos 2, unk 0, add_bos, add_space_prefix).
absl::StatusOr<std::unique_ptr<Vocab>> LoadVocab(const Metadata& metadata, TokenizerKind kind);

// Completes `vocab` once the kind-specific defaults are settled: special ids
// from metadata, add_bos/add_eos overrides, end-of-generation set, the
// special-token order and the pieces (decoded with `decode_normal` for normal
// tokens).
absl::Status FinishVocab(const Metadata& metadata, Vocab* vocab, std::string (*decode_normal)(std::string_view text));

// One part of a text after the special-token partition.
struct Fragment {
  TokenId token = -1;  // >= 0: a special token; else raw text [offset, offset+length)
  size_t offset = 0;
  size_t length = 0;
};

// Splits `text` at the literal occurrences of special tokens, longest first,
// as llama.cpp's tokenizer_st_partition does. Without parse_special nothing
// is split.
std::vector<Fragment> PartitionSpecial(const Vocab& vocab, std::string_view text, bool parse_special);

// Common part of the Tokenizer implementations.
class VocabTokenizer : public Tokenizer {
 public:
  explicit VocabTokenizer(std::unique_ptr<Vocab> vocab) : vocab_(std::move(vocab)) {}

  std::vector<TokenId> Tokenize(std::string_view text, const TokenizeOptions& options) const override;
  std::vector<TokenId> TokenizeParts(std::span<const TextPart> parts, bool add_special,
                                     std::vector<size_t>* part_starts) const override;

  const std::string& pre_tokenizer() const override { return vocab_->pre; }
  int32_t n_vocab() const override { return static_cast<int32_t>(vocab_->tokens.size()); }
  std::string_view TokenText(TokenId id) const override {
    return Valid(id) ? std::string_view(vocab_->tokens[id]) : std::string_view();
  }
  TokenType token_type(TokenId id) const override { return Valid(id) ? vocab_->types[id] : TokenType::kUndefined; }
  float score(TokenId id) const override { return Valid(id) ? vocab_->scores[id] : 0.0f; }
  std::optional<TokenId> FindToken(std::string_view text) const override { return vocab_->Find(text); }
  const std::string& TokenPiece(TokenId id, bool special) const override;
  const SpecialTokens& special_tokens() const override { return vocab_->special; }
  bool add_bos() const override { return vocab_->add_bos; }
  bool add_eos() const override { return vocab_->add_eos; }
  bool add_space_prefix() const override { return vocab_->add_space_prefix; }
  bool IsEndOfGeneration(TokenId id) const override { return vocab_->end_of_generation.contains(id); }
  bool IsSpecial(TokenId id) const override { return Valid(id) && vocab_->IsSpecial(id); }

 protected:
  // Appends the tokens of `frags` (raw runs of `buffer` and special tokens),
  // with BOS/EOS when add_special; `frag_starts[i]` receives the index in
  // `out` where fragment i's tokens begin.
  virtual void EncodeFragments(std::string_view buffer, std::span<const Fragment> frags, bool add_special,
                               std::vector<TokenId>* out, std::vector<size_t>* frag_starts) const = 0;

  bool Valid(TokenId id) const { return id >= 0 && static_cast<size_t>(id) < vocab_->tokens.size(); }
  std::unique_ptr<Vocab> vocab_;
};

// The kind-specific constructors (tokenizer_spm.cc, tokenizer_bpe.cc).
absl::StatusOr<std::unique_ptr<Tokenizer>> CreateSpmTokenizer(const Metadata& metadata);
absl::StatusOr<std::unique_ptr<Tokenizer>> CreateBpeTokenizer(const Metadata& metadata);

}  // namespace cairn::tokenizer_internal

#endif  // CAIRN_BACKENDS_MODEL_TOKENIZER_VOCAB_H_
