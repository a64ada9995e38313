// A small backtracking regular-expression engine over Unicode codepoints, for
// the pre-tokenizer patterns of byte-level BPE vocabularies.
//
// Semantics are those of ECMAScript/Perl (ordered alternation, greedy or lazy
// quantifiers, backtracking), with Unicode-aware classes: \p{L} \p{N} \p{P}
// \p{S} \p{M} \p{Z} \p{C} (and \P{..}) by general category group, \s and \S by
// the White_Space property. \d and \w are ASCII-only, as in std::regex.
// Supported syntax: literals (UTF-8), escapes \r \n \t \f \v \xHH \uHHHH and
// escaped punctuation, '.', [...] classes with ranges and the escapes above,
// groups (...) (?:...) (?i:...) (ASCII case folding), lookaheads (?=...)
// (?!...), anchors ^ $, quantifiers * + ? {n} {n,} {n,m} and their lazy forms.
// Anything else (lookbehind, backreferences, possessive quantifiers,
// subcategories like \p{Lu}) is rejected by Compile with INVALID_ARGUMENT.
#ifndef CAIRN_BACKENDS_MODEL_UNICODE_REGEX_H_
#define CAIRN_BACKENDS_MODEL_UNICODE_REGEX_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace cairn {

// Immutable after Compile; Split and MatchAt are thread-safe.
class UnicodeRegex final {
 public:
  // Parses `pattern`. INVALID_ARGUMENT naming the offset for syntax errors and
  // unsupported constructs.
  static absl::StatusOr<UnicodeRegex> Compile(std::string_view pattern);

  UnicodeRegex(UnicodeRegex&&) noexcept;
  UnicodeRegex& operator=(UnicodeRegex&&) noexcept;
  ~UnicodeRegex();

  const std::string& pattern() const { return pattern_; }

  // Splits each piece of `text` (consecutive lengths in `pieces`, summing to
  // at most text.size()) the way an iterator over the leftmost non-empty
  // matches does: every match becomes a piece and so does every run of
  // unmatched codepoints between matches. Lookaheads and anchors see only the
  // current piece. Appends the new lengths to `out`.
  void Split(std::span<const uint32_t> text, std::span<const size_t> pieces, std::vector<size_t>* out) const;

  // Length of the first-priority non-empty match starting exactly at `pos`
  // within [begin, end), or -1 when there is none.
  int64_t MatchAt(std::span<const uint32_t> text, size_t begin, size_t end, size_t pos) const;

  struct Node;
  // Which codepoints can start a match of one top-level alternative
  // (conservative: may admit codepoints that then fail).
  struct StartFilter {
    bool any = false;
    uint64_t ascii[2] = {0, 0};
    uint16_t by_flags = 0;  // bit f: non-ASCII codepoints whose CodepointFlags & 0x0F == f
  };

 private:
  UnicodeRegex() = default;

  std::string pattern_;
  std::unique_ptr<Node> root_;        // a group of alternatives
  std::vector<StartFilter> filters_;  // one per alternative of root_
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MODEL_UNICODE_REGEX_H_
