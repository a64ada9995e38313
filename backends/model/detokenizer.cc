#include "backends/model/detokenizer.h"

#include "absl/strings/str_format.h"

namespace cairn {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// For a lead byte: the sequence length and the allowed range of the second
// byte (RFC 3629). Length 0: not a lead byte.
struct LeadInfo {
  int length;
  uint8_t lo, hi;
};

LeadInfo Lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, DetokenizeOptions options)
    : tokenizer_(tokenizer), options_(options) {
  Reset();
}

void StreamingDetokenizer::Reset() {
  pending_.clear();
  strip_space_ = options_.strip_space_prefix && tokenizer_.add_space_prefix();
}

absl::Status StreamingDetokenizer::Push(TokenId id, std::string* out) {
  if (id < 0 || id >= tokenizer_.n_vocab()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("token id %d outside the vocabulary [0, %d)", id, tokenizer_.n_vocab()));
  }
  std::string_view piece;
  if (tokenizer_.IsSpecial(id)) {
    piece = tokenizer_.TokenPiece(id, options_.render_special);
    // SPM tokenization prepends a space to the text after a special token.
    strip_space_ = options_.strip_space_prefix && tokenizer_.add_space_prefix();
  } else {
    piece = tokenizer_.TokenPiece(id, true);
    if (!piece.empty()) {
      if (strip_space_ && piece.front() == ' ') piece.remove_prefix(1);
      strip_space_ = false;
    }
  }
  pending_.append(piece);
  Drain(out, false);
  return absl::OkStatus();
}

void StreamingDetokenizer::Flush(std::string* out) {
  Drain(out, true);
  Reset();
}

void StreamingDetokenizer::Drain(std::string* out, bool final) {
  const auto* s = reinterpret_cast<const uint8_t*>(pending_.data());
  const size_t n = pending_.size();
  size_t i = 0;
  size_t emitted = 0;  // pending_[emitted, i) is valid text not yet copied
  auto flush_valid = [&] {
    out->append(pending_, emitted, i - emitted);
    emitted = i;
  };
  while (i < n) {
    const LeadInfo lead = Lead(s[i]);
    if (lead.length == 1) {
      ++i;
      continue;
    }
    if (lead.length == 0) {  // stray continuation byte or invalid lead
      flush_valid();
      out->append(kReplacement);
      emitted = ++i;
      continue;
    }
    // How many bytes of the sequence are present and valid so far.
    int good = 1;
    while (good < lead.length && i + good < n) {
      const uint8_t c = s[i + good];
      const bool ok = good == 1 ? (c >= lead.lo && c <= lead.hi) : (c & 0xC0) == 0x80;
      if (!ok) break;
      ++good;
    }
    if (good == lead.length) {
      i += good;
      continue;
    }
    if (i + good == n && !final) break;  // unfinished: wait for more bytes
    flush_valid();
    out->append(kReplacement);  // one per maximal invalid subpart
    i += good;
    emitted = i;
  }
  flush_valid();
  pending_.erase(0, i);
}

absl::StatusOr<std::string> Detokenize(const Tokenizer& tokenizer, std::span<const TokenId> ids,
                                       DetokenizeOptions options) {
  StreamingDetokenizer detok(tokenizer, options);
  std::string out;
  for (const TokenId id : ids) {
    if (auto s = detok.Push(id, &out); !s.ok()) return s;
  }
  detok.Flush(&out);
  return out;
}

}  // namespace cairn
