// SentencePiece-style BPE over scores (tokenizer.ggml.model = "llama"), as
// llama.cpp's SPM tokenizer: spaces become U+2581, a space is prepended at the
// start and after each special token, then the adjacent pair whose
// concatenation is the highest-scoring token is merged (leftmost on ties)
// until no pair is a token; pieces that are not tokens fall back to <0xNN>.
#include <algorithm>
#include <queue>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "backends/model/tokenizer_vocab.h"
#include "backends/model/unicode.h"

namespace cairn::tokenizer_internal {

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581

std::string ReplaceAll(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  size_t start = 0;
  while (true) {
    const size_t at = text.find(from, start);
    if (at == std::string_view::npos) break;
    out.append(text.substr(start, at - start));
    out.append(to);
    start = at + from.size();
  }
  out.append(text.substr(start));
  return out;
}

std::string DecodeSpmNormal(std::string_view text) { return ReplaceAll(text, kSpaceMark, " "); }

class SpmTokenizer final : public VocabTokenizer {
 public:
  explicit SpmTokenizer(std::unique_ptr<Vocab> vocab) : VocabTokenizer(std::move(vocab)) {
    for (int b = 0; b < 256; ++b) {
      auto id = vocab_->Find(absl::StrFormat("<0x%02X>", b));
      if (!id) id = vocab_->Find(std::string(1, static_cast<char>(b)));
      byte_tokens_[b] = id ? *id : vocab_->special.unk;
    }
    // Merges never cross a boundary that no token spans, and merges on the
    // two sides are independent, so the text can be cut there and each part
    // tokenized alone with the same result (and a much smaller queue). When no
    // token has a U+2581 right after something else ("a\u2581", "a\u2581b"),
    // nothing spans the boundary before a U+2581 that follows another character.
    split_before_space_ = true;
    for (const std::string& t : vocab_->tokens) {
      for (size_t at = t.find(kSpaceMark, 1); at != std::string::npos; at = t.find(kSpaceMark, at + 1)) {
        if (at < kSpaceMark.size() || t.compare(at - kSpaceMark.size(), kSpaceMark.size(), kSpaceMark) != 0) {
          split_before_space_ = false;
        }
      }
    }
  }

  TokenizerKind kind() const override { return TokenizerKind::kSpm; }

  void EncodeFragments(std::string_view buffer, std::span<const Fragment> frags, bool add_special,
                       std::vector<TokenId>* out, std::vector<size_t>* frag_starts) const override {
    if (add_special && vocab_->add_bos) out->push_back(vocab_->special.bos);
    bool prev_special = true;
    std::string buf;
    for (const Fragment& f : frags) {
      frag_starts->push_back(out->size());
      if (f.token >= 0) {
        out->push_back(f.token);
        prev_special = true;
        continue;
      }
      buf.clear();
      if (vocab_->add_space_prefix && prev_special) buf.push_back(' ');
      buf.append(buffer.substr(f.offset, f.length));
      buf = ReplaceAll(buf, " ", kSpaceMark);
      TokenizeEscaped(buf, out);
      prev_special = false;
    }
    if (add_special && vocab_->add_eos) out->push_back(vocab_->special.eos);
  }

 private:
  void TokenizeEscaped(std::string_view text, std::vector<TokenId>* out) const {
    if (!split_before_space_) {
      TokenizeWord(text, out);
      return;
    }
    // Cut only at symbol boundaries (the same UTF-8 stepping as TokenizeWord,
    // so that invalid UTF-8 is split into the same symbols). Parts repeat:
    // within one call each distinct short part is merged once.
    struct Span {
      uint32_t begin, length;
    };
    absl::flat_hash_map<std::string_view, Span> cache;
    auto part = [&](std::string_view word) {
      if (word.size() > 48) {
        TokenizeWord(word, out);
        return;
      }
      if (auto it = cache.find(word); it != cache.end()) {
        for (uint32_t k = 0; k < it->second.length; ++k) {
          out->push_back((*out)[it->second.begin + k]);
        }
        return;
      }
      const size_t before = out->size();
      TokenizeWord(word, out);
      cache.emplace(word, Span{static_cast<uint32_t>(before), static_cast<uint32_t>(out->size() - before)});
    };
    size_t start = 0;
    bool prev_space = false;
    for (size_t p = 0; p < text.size();) {
      const size_t len = std::min(Utf8SequenceLength(static_cast<uint8_t>(text[p])), text.size() - p);
      const bool space = text.substr(p, len) == kSpaceMark;
      if (space && !prev_space && p > start) {
        part(text.substr(start, p - start));
        start = p;
      }
      prev_space = space;
      p += len;
    }
    part(text.substr(start));
  }

  struct Symbol {
    int prev, next;
    size_t offset, length;  // bytes of the text; length 0 once merged away
  };
  struct Bigram {
    float score;
    int left, right;
    size_t length;
  };
  struct BigramOrder {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
  };

  void TokenizeWord(std::string_view text, std::vector<TokenId>* out) const {
    std::vector<Symbol> symbols;
    for (size_t offset = 0; offset < text.size();) {
      const size_t len = std::min(Utf8SequenceLength(static_cast<uint8_t>(text[offset])), text.size() - offset);
      const int index = static_cast<int>(symbols.size());
      symbols.push_back({index - 1, offset + len == text.size() ? -1 : index + 1, offset, len});
      offset += len;
    }
    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    auto try_add = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const std::string_view pair = text.substr(symbols[left].offset, symbols[left].length + symbols[right].length);
      auto id = vocab_->Find(pair);
      if (!id) return;
      queue.push({vocab_->scores[*id], left, right, pair.size()});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);
    while (!queue.empty()) {
      const Bigram b = queue.top();
      queue.pop();
      Symbol& left = symbols[b.left];
      Symbol& right = symbols[b.right];
      if (left.length == 0 || right.length == 0 || left.length + right.length != b.length) {
        continue;  // stale
      }
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = b.left;
      try_add(left.prev, b.left);
      try_add(b.left, left.next);
    }
    for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
      const std::string_view piece = text.substr(symbols[i].offset, symbols[i].length);
      if (auto id = vocab_->Find(piece)) {
        out->push_back(*id);
        continue;
      }
      for (const char c : piece) {
        const TokenId id = byte_tokens_[static_cast<uint8_t>(c)];
        if (id >= 0) out->push_back(id);
      }
    }
  }

  TokenId byte_tokens_[256];
  bool split_before_space_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> CreateSpmTokenizer(const Metadata& metadata) {
  auto vocab = LoadVocab(metadata, TokenizerKind::kSpm);
  if (!vocab.ok()) return vocab.status();
  if (auto s = FinishVocab(metadata, vocab->get(), &DecodeSpmNormal); !s.ok()) return s;
  return std::unique_ptr<Tokenizer>(new SpmTokenizer(*std::move(vocab)));
}

}  // namespace cairn::tokenizer_internal
