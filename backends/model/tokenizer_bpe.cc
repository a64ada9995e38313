// Byte-level BPE (tokenizer.ggml.model = "gpt2"), as llama.cpp's BPE
// tokenizer: the text is split into words by the pre-tokenizer's regexes
// (chosen by tokenizer.ggml.pre), each word's UTF-8 bytes are mapped to the
// GPT-2 byte alphabet, then the adjacent pair with the lowest merge rank is
// merged (leftmost on ties) until no pair has a rank.
#include <queue>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "backends/model/tokenizer_vocab.h"
#include "backends/model/unicode.h"
#include "backends/model/unicode_regex.h"

namespace cairn::tokenizer_internal {

namespace {

// The regexes of llama.cpp's pre-tokenizer types (llama-vocab.cpp), with
// (?i:...) contractions spelled out as it does.
constexpr std::string_view kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr std::string_view kLlama3Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen35Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kSeedCoderRegex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kBailingRegex =
    R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";

struct PreTokenizer {
  std::vector<std::string_view> names;
  std::vector<std::string_view> regexes;
  bool ignore_merges = false;
  bool add_bos = false;
  bool no_bos = false;
};

const std::vector<PreTokenizer>& PreTokenizers() {
  static const auto* const table = new std::vector<PreTokenizer>{
      {{"default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Regex, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {kLlama3Regex},
       /*ignore_merges=*/true,
       /*add_bos=*/true},
      {{"dbrx", "smaug-bpe"}, {kLlama3Regex}},
      {{"chatglm-bpe", "glm4"}, {kLlama3Regex}, false, false, /*no_bos=*/true},
      {{"qwen2", "deepseek-r1-qwen", "kormo", "megrez", "stablelm2", "hunyuan", "grok-2", "solar-open"}, {kQwen2Regex}},
      {{"qwen35"}, {kQwen35Regex}},
      {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"},
       {R"(\p{N})", kGpt2Regex}},
      {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
        "modern-bert", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4"},
       {kGpt2Regex}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Regex, "[0-9][0-9][0-9]"}},
      {{"seed-coder"}, {kSeedCoderRegex}},
      {{"bailingmoe", "bailingmoe2", "llada-moe"}, {kBailingRegex}},
  };
  return *table;
}

std::string DecodeByteLevel(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const uint32_t cp : DecodeUtf8Lenient(text)) {
    const int b = AlphabetToByte(cp);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      AppendUtf8(cp, &out);  // not in the alphabet: keep the character itself
    }
  }
  return out;
}

class BpeTokenizer final : public VocabTokenizer {
 public:
  BpeTokenizer(std::unique_ptr<Vocab> vocab, std::vector<UnicodeRegex> regexes, bool ignore_merges)
      : VocabTokenizer(std::move(vocab)), regexes_(std::move(regexes)), ignore_merges_(ignore_merges) {
    std::string s;
    for (int b = 0; b < 256; ++b) {
      s.clear();
      AppendUtf8(ByteToAlphabet(static_cast<uint8_t>(b)), &s);
      auto id = vocab_->Find(s);
      alphabet_tokens_[b] = id ? *id : -1;
      auto raw = vocab_->Find(std::string(1, static_cast<char>(b)));
      raw_byte_tokens_[b] = raw ? *raw : -1;
    }
  }

  absl::Status LoadMerges(const std::vector<std::string>& merges) {
    merges_.reserve(merges.size());
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const std::string& line = merges[rank];
      const size_t space = line.find(' ', 1);
      if (space == std::string::npos) continue;  // not a pair: never applies (as llama.cpp)
      const std::string_view a = std::string_view(line).substr(0, space);
      const std::string_view b = std::string_view(line).substr(space + 1);
      auto ia = vocab_->Find(a);
      auto ib = vocab_->Find(b);
      if (!ia || !ib) continue;  // cannot apply to token symbols
      std::string joined(a);
      joined.append(b);
      auto merged = vocab_->Find(joined);
      merges_.emplace(PairKey(*ia, *ib), Merge{static_cast<int32_t>(rank), merged ? *merged : -1});
    }
    return absl::OkStatus();
  }

  TokenizerKind kind() const override { return TokenizerKind::kBpe; }

  void EncodeFragments(std::string_view buffer, std::span<const Fragment> frags, bool add_special,
                       std::vector<TokenId>* out, std::vector<size_t>* frag_starts) const override {
    if (add_special && vocab_->add_bos) out->push_back(vocab_->special.bos);
    for (const Fragment& f : frags) {
      frag_starts->push_back(out->size());
      if (f.token >= 0) {
        out->push_back(f.token);
      } else {
        TokenizeText(buffer.substr(f.offset, f.length), out);
      }
    }
    if (add_special && vocab_->add_eos) out->push_back(vocab_->special.eos);
  }

 private:
  struct Merge {
    int32_t rank;
    TokenId merged;
  };
  struct Symbol {
    int prev, next;
    TokenId id;
    uint32_t offset, length;  // bytes of the word; length 0 once merged away
  };
  struct Bigram {
    int32_t rank;
    int left, right;
    TokenId left_id, right_id;
  };
  struct BigramOrder {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
  };

  static uint64_t PairKey(TokenId a, TokenId b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  void TokenizeText(std::string_view text, std::vector<TokenId>* out) const {
    const std::vector<uint32_t> cpts = DecodeUtf8Lenient(text);
    std::vector<size_t> pieces = {cpts.size()};
    std::vector<size_t> next;
    for (const UnicodeRegex& re : regexes_) {
      next.clear();
      re.Split(cpts, pieces, &next);
      pieces.swap(next);
    }
    // Words repeat: within one call, each distinct short word is merged once.
    // (The result of a word does not depend on its context.)
    struct Span {
      uint32_t begin, length;
    };
    absl::flat_hash_map<std::string, Span> cache;
    std::string word;
    size_t start = 0;
    for (const size_t len : pieces) {
      word.clear();
      for (size_t i = start; i < start + len; ++i) AppendUtf8(cpts[i], &word);
      start += len;
      if (pieces.size() < 16 || word.size() > 32) {
        TokenizeWord(word, out);
        continue;
      }
      if (auto it = cache.find(word); it != cache.end()) {
        for (uint32_t k = 0; k < it->second.length; ++k) {
          out->push_back((*out)[it->second.begin + k]);
        }
        continue;
      }
      const size_t before = out->size();
      TokenizeWord(word, out);
      cache.emplace(word, Span{static_cast<uint32_t>(before), static_cast<uint32_t>(out->size() - before)});
    }
  }

  // `word`: the raw UTF-8 bytes of one pre-tokenized word.
  void TokenizeWord(std::string_view word, std::vector<TokenId>* out) const {
    if (word.empty()) return;
    if (ignore_merges_) {
      std::string encoded;
      for (const char c : word) AppendUtf8(ByteToAlphabet(static_cast<uint8_t>(c)), &encoded);
      if (auto id = vocab_->Find(encoded)) {
        out->push_back(*id);
        return;
      }
    }
    std::vector<Symbol> symbols(word.size());
    const int n = static_cast<int>(word.size());
    for (int i = 0; i < n; ++i) {
      symbols[i] = {i - 1, i + 1 == n ? -1 : i + 1, alphabet_tokens_[static_cast<uint8_t>(word[i])],
                    static_cast<uint32_t>(i), 1};
    }
    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto try_add = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const TokenId a = symbols[left].id, b = symbols[right].id;
      if (a < 0 || b < 0) return;
      auto it = merges_.find(PairKey(a, b));
      if (it == merges_.end()) return;
      queue.push({it->second.rank, left, right, a, b});
    };
    for (int i = 1; i < n; ++i) try_add(i - 1, i);
    while (!queue.empty()) {
      const Bigram bg = queue.top();
      queue.pop();
      Symbol& left = symbols[bg.left];
      Symbol& right = symbols[bg.right];
      if (left.length == 0 || right.length == 0 || left.id != bg.left_id || right.id != bg.right_id ||
          left.next != bg.right) {
        continue;  // stale
      }
      left.id = merges_.find(PairKey(bg.left_id, bg.right_id))->second.merged;
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = bg.left;
      try_add(left.prev, bg.left);
      try_add(bg.left, left.next);
    }
    for (int i = 0; i != -1; i = symbols[i].next) {
      const Symbol& s = symbols[i];
      if (s.id >= 0) {
        out->push_back(s.id);
        continue;
      }
      // Not a token: llama.cpp looks up each byte of the symbol's encoded text
      // as a one-byte token and drops the bytes that are not.
      std::string encoded;
      for (uint32_t k = s.offset; k < s.offset + s.length; ++k) {
        AppendUtf8(ByteToAlphabet(static_cast<uint8_t>(word[k])), &encoded);
      }
      for (const char c : encoded) {
        const TokenId id = raw_byte_tokens_[static_cast<uint8_t>(c)];
        if (id >= 0) out->push_back(id);
      }
    }
  }

  std::vector<UnicodeRegex> regexes_;
  bool ignore_merges_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  TokenId alphabet_tokens_[256];
  TokenId raw_byte_tokens_[256];
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> CreateBpeTokenizer(const Metadata& metadata) {
  auto vocab = LoadVocab(metadata, TokenizerKind::kBpe);
  if (!vocab.ok()) return vocab.status();
  auto pre = metadata.GetStringOr("tokenizer.ggml.pre", "default");
  if (!pre.ok()) return pre.status();
  const PreTokenizer* found = nullptr;
  for (const PreTokenizer& p : PreTokenizers()) {
    for (std::string_view name : p.names) {
      if (name == *pre) found = &p;
    }
  }
  if (found == nullptr) {
    std::string known;
    for (const PreTokenizer& p : PreTokenizers()) {
      for (std::string_view name : p.names) {
        if (!known.empty()) known.append(", ");
        known.append(name);
      }
    }
    return absl::UnimplementedError(
        absl::StrFormat("BPE pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported; known: %s", *pre, known));
  }
  (*vocab)->pre = *pre;
  (*vocab)->add_bos = found->add_bos;
  if (found->no_bos) (*vocab)->special.bos = -1;
  if (auto s = FinishVocab(metadata, vocab->get(), &DecodeByteLevel); !s.ok()) return s;
  // BPE tokenization never prepends a space, whatever the file says (llama.cpp
  // reads the key but only its SPM path uses it).
  (*vocab)->add_space_prefix = false;

  std::vector<UnicodeRegex> regexes;
  for (std::string_view pattern : found->regexes) {
    auto re = UnicodeRegex::Compile(pattern);
    if (!re.ok()) return re.status();
    regexes.push_back(*std::move(re));
  }
  auto merges = metadata.GetStringArrayRef("tokenizer.ggml.merges");
  if (!merges.ok()) return merges.status();
  auto tokenizer = std::make_unique<BpeTokenizer>(*std::move(vocab), std::move(regexes), found->ignore_merges);
  if (auto s = tokenizer->LoadMerges(**merges); !s.ok()) return s;
  return std::unique_ptr<Tokenizer>(std::move(tokenizer));
}

}  // namespace cairn::tokenizer_internal
