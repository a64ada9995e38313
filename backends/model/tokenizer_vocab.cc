#include "backends/model/tokenizer_vocab.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cairn::tokenizer_internal {

namespace {

constexpr std::string_view kPrefix = "tokenizer.ggml.";

std::string Key(std::string_view name) {
  std::string key(kPrefix);
  key.append(name);
  return key;
}

// Texts llama.cpp treats as end of turn / end of generation whatever their
// declared type (they are then forced to control tokens).
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>",      "<|im_end|>", "<|end|>", "<end_of_turn>",         "<|endoftext|>",
    "<|end_of_text|>", "<EOT>",      "_<EOT>",  "<｜end▁of▁sentence｜>", "<end_of_utterance>",
};
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>",         "<end_of_turn>",      "<|endoftext|>",         "<|eom_id|>",
    "<EOT>",      "_<EOT>",     "<|end_of_text|>", "<end_of_utterance>", "<｜end▁of▁sentence｜>",
};

// Fill-in-the-middle tokens, found by text as llama.cpp does and forced to
// control tokens; the pad, repo and file-separator ones also end generation.
struct FimTexts {
  bool end_of_generation;
  std::vector<std::string_view> texts;
};
const FimTexts kFimTexts[] = {
    {false,
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
      "<|prefix|>"}},
    {false,
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>",
      "<|suffix|>"}},
    {false,
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
      "<|middle|>"}},
    {true, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
    {true, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
    {true, {"<|file_sep|>"}},
};

int ParseHexByte(std::string_view text) {
  // "<0xNN>"
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int v = 0;
  for (int k = 3; k < 5; ++k) {
    const char c = text[k];
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return -1;
    v = v * 16 + d;
  }
  return v;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Vocab>> LoadVocab(const Metadata& metadata, TokenizerKind kind) {
  auto vocab = std::make_unique<Vocab>();
  auto model = metadata.GetString(Key("model"));
  if (!model.ok()) return model.status();
  vocab->model = *model;

  auto tokens = metadata.GetStringArrayRef(Key("tokens"));
  if (!tokens.ok()) return tokens.status();
  const size_t n = (*tokens)->size();
  if (n == 0) return absl::InvalidArgumentError("tokenizer.ggml.tokens is empty");
  if (n > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("tokenizer.ggml.tokens is too large");
  }
  vocab->tokens = **tokens;
  for (size_t i = 0; i < n; ++i) {
    // As llama.cpp: an empty token would match everywhere.
    if (vocab->tokens[i].empty()) vocab->tokens[i] = absl::StrCat("[EMPTY_", i, "]");
  }

  vocab->scores.assign(n, 0.0f);
  if (metadata.Has(Key("scores"))) {
    auto scores = metadata.GetFloatArray(Key("scores"));
    if (!scores.ok()) return scores.status();
    if (scores->size() < n) {
      return absl::InvalidArgumentError(
          absl::StrFormat("tokenizer.ggml.scores has %d entries for %d tokens", scores->size(), n));
    }
    for (size_t i = 0; i < n; ++i) vocab->scores[i] = static_cast<float>((*scores)[i]);
  }

  vocab->types.assign(n, TokenType::kNormal);
  if (metadata.Has(Key("token_type"))) {
    auto types = metadata.GetIntArray(Key("token_type"));
    if (!types.ok()) return types.status();
    if (types->size() < n) {
      return absl::InvalidArgumentError(
          absl::StrFormat("tokenizer.ggml.token_type has %d entries for %d tokens", types->size(), n));
    }
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = (*types)[i];
      vocab->types[i] = t >= 1 && t <= 6 ? static_cast<TokenType>(t) : TokenType::kUndefined;
    }
  }

  vocab->ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto [it, inserted] = vocab->ids.emplace(vocab->tokens[i], static_cast<TokenId>(i));
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrFormat("duplicate token '%s' in vocabulary: ids %d and %d", vocab->tokens[i], it->second, i));
    }
  }

  if (kind == TokenizerKind::kSpm) {
    vocab->special.bos = 1;
    vocab->special.eos = 2;
    vocab->special.unk = 0;
    vocab->add_bos = true;
    vocab->add_space_prefix = true;
  }
  return vocab;
}

absl::Status FinishVocab(const Metadata& metadata, Vocab* vocab, std::string (*decode_normal)(std::string_view text)) {
  const auto n = static_cast<int64_t>(vocab->tokens.size());
  struct SpecialKey {
    std::string_view name;
    TokenId* id;
  };
  const SpecialKey keys[] = {
      {"bos_token_id", &vocab->special.bos},       {"eos_token_id", &vocab->special.eos},
      {"eot_token_id", &vocab->special.eot},       {"unknown_token_id", &vocab->special.unk},
      {"seperator_token_id", &vocab->special.sep}, {"padding_token_id", &vocab->special.pad},
  };
  for (const auto& key : keys) {
    if (*key.id >= n) *key.id = -1;  // a default outside this vocabulary
    if (!metadata.Has(Key(key.name))) continue;
    auto v = metadata.GetInt(Key(key.name));
    if (!v.ok()) return v.status();
    // llama.cpp ignores out-of-range ids (files write 0xFFFFFFFF for "none").
    if (*v >= 0 && *v < n) *key.id = static_cast<TokenId>(*v);
  }

  auto add_space = metadata.GetBoolOr(Key("add_space_prefix"), vocab->add_space_prefix);
  if (!add_space.ok()) return add_space.status();
  vocab->add_space_prefix = *add_space;
  auto add_bos = metadata.GetBoolOr(Key("add_bos_token"), vocab->add_bos);
  if (!add_bos.ok()) return add_bos.status();
  vocab->add_bos = *add_bos;
  auto add_eos = metadata.GetBoolOr(Key("add_eos_token"), vocab->add_eos);
  if (!add_eos.ok()) return add_eos.status();
  vocab->add_eos = *add_eos;
  if (vocab->add_bos && vocab->special.bos < 0) {
    return absl::InvalidArgumentError("tokenizer.ggml.add_bos_token is true but there is no bos");
  }
  if (vocab->add_eos && vocab->special.eos < 0) {
    return absl::InvalidArgumentError("tokenizer.ggml.add_eos_token is true but there is no eos");
  }

  // End of turn / end of generation by text, as llama.cpp does.
  for (std::string_view text : kEotTexts) {
    if (vocab->special.eot >= 0) break;
    if (auto id = vocab->Find(text)) vocab->special.eot = *id;
  }
  for (std::string_view text : kEogTexts) {
    if (auto id = vocab->Find(text)) {
      vocab->end_of_generation.insert(*id);
      vocab->types[*id] = TokenType::kControl;
    }
  }
  if (vocab->special.eot >= 0) vocab->types[vocab->special.eot] = TokenType::kControl;
  for (const FimTexts& fim : kFimTexts) {
    for (std::string_view text : fim.texts) {
      if (auto id = vocab->Find(text)) {
        vocab->types[*id] = TokenType::kControl;
        if (fim.end_of_generation) vocab->end_of_generation.insert(*id);
        break;
      }
    }
  }
  for (TokenId id : {vocab->special.eos, vocab->special.eot}) {
    if (id >= 0) vocab->end_of_generation.insert(id);
  }

  for (TokenId id = 0; id < n; ++id) {
    if (vocab->IsSpecial(id)) vocab->special_by_length.push_back(id);
  }
  std::stable_sort(vocab->special_by_length.begin(), vocab->special_by_length.end(),
                   [&](TokenId a, TokenId b) { return vocab->tokens[a].size() > vocab->tokens[b].size(); });

  vocab->pieces.resize(n);
  for (TokenId id = 0; id < n; ++id) {
    const std::string& text = vocab->tokens[id];
    std::string& piece = vocab->pieces[id];
    switch (vocab->types[id]) {
      case TokenType::kNormal:
        piece = decode_normal(text);
        break;
      case TokenType::kByte: {
        const int b = ParseHexByte(text);
        piece = b >= 0 ? std::string(1, static_cast<char>(b)) : text;
        break;
      }
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUserDefined:
        piece = text;
        break;
      case TokenType::kUnused:
      case TokenType::kUndefined:
        break;  // renders as nothing, as in llama.cpp
    }
  }
  return absl::OkStatus();
}

std::vector<Fragment> PartitionSpecial(const Vocab& vocab, std::string_view text, bool parse_special) {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, 0, text.size()});
  if (!parse_special) return frags;
  std::vector<Fragment> next;
  for (const TokenId id : vocab.special_by_length) {
    const std::string& needle = vocab.tokens[id];
    bool any = false;
    for (const Fragment& f : frags) {
      if (f.token < 0 && f.length >= needle.size() &&
          text.substr(f.offset, f.length).find(needle) != std::string_view::npos) {
        any = true;
        break;
      }
    }
    if (!any) continue;
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const std::string_view part = text.substr(f.offset, f.length);
      size_t start = 0;
      while (true) {
        const size_t match = part.find(needle, start);
        if (match == std::string_view::npos) break;
        if (match > start) next.push_back({-1, f.offset + start, match - start});
        next.push_back({id, f.offset + match, needle.size()});
        start = match + needle.size();
      }
      if (start < part.size()) next.push_back({-1, f.offset + start, part.size() - start});
    }
    frags.swap(next);
  }
  return frags;
}

const std::string& VocabTokenizer::TokenPiece(TokenId id, bool special) const {
  static const std::string* const kEmpty = new std::string();
  if (!Valid(id)) return *kEmpty;
  if (!special) {
    const TokenType t = vocab_->types[id];
    if (t == TokenType::kControl || t == TokenType::kUnknown) return *kEmpty;
  }
  return vocab_->pieces[id];
}

}  // namespace cairn::tokenizer_internal

namespace cairn::tokenizer_internal {

std::vector<TokenId> VocabTokenizer::Tokenize(std::string_view text, const TokenizeOptions& options) const {
  std::vector<TokenId> out;
  std::vector<size_t> frag_starts;
  const auto frags = PartitionSpecial(*vocab_, text, options.parse_special);
  EncodeFragments(text, frags, options.add_special, &out, &frag_starts);
  return out;
}

std::vector<TokenId> VocabTokenizer::TokenizeParts(std::span<const TextPart> parts, bool add_special,
                                                   std::vector<size_t>* part_starts) const {
  std::string buffer;
  std::vector<size_t> part_offsets;
  std::vector<Fragment> frags;
  for (const TextPart& part : parts) {
    const size_t base = buffer.size();
    part_offsets.push_back(base);
    buffer.append(part.text);
    for (Fragment f : PartitionSpecial(*vocab_, part.text, part.parse_special)) {
      f.offset += base;
      // Text runs of adjacent parts are one run, as in the whole text.
      if (f.token < 0 && !frags.empty() && frags.back().token < 0 &&
          frags.back().offset + frags.back().length == f.offset) {
        frags.back().length += f.length;
      } else {
        frags.push_back(f);
      }
    }
  }
  std::vector<TokenId> out;
  std::vector<size_t> frag_starts;
  EncodeFragments(buffer, frags, add_special, &out, &frag_starts);
  if (part_starts == nullptr) return out;

  // Where the fragments' tokens end (before an added EOS).
  const size_t runs_end = out.size() - (add_special && vocab_->add_eos ? 1 : 0);
  part_starts->clear();
  for (const size_t offset : part_offsets) {
    // The fragment holding byte `offset` (none: past the end).
    size_t f = 0;
    while (f < frags.size() && frags[f].offset + frags[f].length <= offset) ++f;
    if (f == frags.size()) {
      part_starts->push_back(runs_end);
      continue;
    }
    const Fragment& frag = frags[f];
    const size_t begin = frag_starts[f];
    const size_t end = f + 1 < frags.size() ? frag_starts[f + 1] : runs_end;
    // Inside a text run: walk the token pieces. SPM prepended a space to a
    // run at the start or after a special token (its first token may be that
    // space alone).
    const bool prefixed = frag.token < 0 && vocab_->add_space_prefix && (f == 0 || frags[f - 1].token >= 0);
    if (frag.token >= 0 || (offset == frag.offset && !prefixed)) {
      part_starts->push_back(begin);
      continue;
    }
    size_t total = 0;
    for (size_t t = begin; t < end; ++t) total += vocab_->pieces[out[t]].size();
    if (total != frag.length + (prefixed ? 1 : 0)) {
      part_starts->push_back(begin);  // bytes and pieces do not align
      continue;
    }
    size_t pos = frag.offset - (prefixed ? 1 : 0);
    size_t index = begin;
    for (size_t t = begin; t < end; ++t) {
      const size_t len = vocab_->pieces[out[t]].size();
      if (pos + len > offset) {
        index = t;
        break;
      }
      pos += len;
      index = t + 1;
    }
    part_starts->push_back(index);
  }
  return out;
}

}  // namespace cairn::tokenizer_internal
