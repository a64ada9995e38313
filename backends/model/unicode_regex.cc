#include "backends/model/unicode_regex.h"

#include <bitset>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "backends/model/unicode.h"

namespace cairn {

namespace {

constexpr int kUnbounded = std::numeric_limits<int>::max();
// Bound on the matcher's recursion, so that a pathological pattern over a long
// input fails to match instead of exhausting the stack.
constexpr int kMaxDepth = 20000;

// A set of codepoints: explicit ranges, category groups, White_Space.
struct CharSet {
  bool negated = false;
  uint8_t categories = 0;  // bit i: UnicodeCategory i
  bool whitespace = false;
  bool non_whitespace = false;
  bool any_but_newline = false;  // '.'
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  std::bitset<128> ascii;  // precomputed result for ASCII

  bool Slow(uint32_t cp) const {
    bool in = false;
    const uint8_t flags = CodepointFlags(cp);
    if (categories & (1u << (flags & 0x07))) in = true;
    const bool ws = (flags & unicode_internal::kWhitespaceBit) != 0;
    if (whitespace && ws) in = true;
    if (non_whitespace && !ws) in = true;
    if (any_but_newline && cp != '\n' && cp != '\r' && cp != 0x2028 && cp != 0x2029) in = true;
    if (!in) {
      for (const auto& [lo, hi] : ranges) {
        if (cp >= lo && cp <= hi) {
          in = true;
          break;
        }
      }
    }
    return in != negated;
  }
  void Finish() {
    for (uint32_t c = 0; c < 128; ++c) ascii[c] = Slow(c);
  }
  bool Matches(uint32_t cp) const { return cp < 128 ? ascii[cp] : Slow(cp); }
};

}  // namespace

struct UnicodeRegex::Node {
  enum class Kind { kSet, kGroup, kRepeat, kLookahead, kBegin, kEnd };
  Kind kind = Kind::kSet;
  CharSet set;                                  // kSet
  std::vector<std::vector<Node>> alternatives;  // kGroup, kRepeat (body), kLookahead
  int min = 1, max = 1;                         // kRepeat
  bool greedy = true;                           // kRepeat
  bool negative = false;                        // kLookahead

  bool IsSingleSet() const {
    return alternatives.size() == 1 && alternatives[0].size() == 1 && alternatives[0][0].kind == Kind::kSet;
  }
};

namespace {

using Node = UnicodeRegex::Node;
using Seq = std::vector<Node>;

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  absl::StatusOr<Node> Parse() {
    Node root;
    root.kind = Node::Kind::kGroup;
    auto alts = ParseAlternatives(false);
    if (!alts.ok()) return alts.status();
    if (i_ != p_.size()) return Error("unbalanced ')'");
    root.alternatives = *std::move(alts);
    return root;
  }

 private:
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrFormat("regex '%s': %s at offset %d", p_, what, i_));
  }
  bool AtEnd() const { return i_ >= p_.size(); }
  char Peek() const { return p_[i_]; }

  absl::StatusOr<std::vector<Seq>> ParseAlternatives(bool icase) {
    std::vector<Seq> alts(1);
    while (!AtEnd() && Peek() != ')') {
      if (Peek() == '|') {
        ++i_;
        alts.emplace_back();
        continue;
      }
      auto atom = ParseAtom(icase);
      if (!atom.ok()) return atom.status();
      auto quantified = ParseQuantifier(*std::move(atom));
      if (!quantified.ok()) return quantified.status();
      alts.back().push_back(*std::move(quantified));
    }
    return alts;
  }

  absl::StatusOr<Node> ParseQuantifier(Node atom) {
    if (AtEnd()) return atom;
    int min, max;
    const char c = Peek();
    if (c == '*') {
      min = 0, max = kUnbounded, ++i_;
    } else if (c == '+') {
      min = 1, max = kUnbounded, ++i_;
    } else if (c == '?') {
      min = 0, max = 1, ++i_;
    } else if (c == '{') {
      const size_t save = i_;
      ++i_;
      auto num = [&]() -> int {
        int v = -1;
        while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
          v = (v < 0 ? 0 : v) * 10 + (Peek() - '0');
          if (v > 100000) return -2;
          ++i_;
        }
        return v;
      };
      min = num();
      if (min == -2) return Error("repeat count too large");
      if (min < 0) {  // not a quantifier: a literal '{'
        i_ = save;
        return atom;
      }
      max = min;
      if (!AtEnd() && Peek() == ',') {
        ++i_;
        max = num();
        if (max == -2) return Error("repeat count too large");
        if (max < 0) max = kUnbounded;
      }
      if (AtEnd() || Peek() != '}') return Error("bad repeat");
      ++i_;
      if (max < min) return Error("repeat max below min");
    } else {
      return atom;
    }
    if (atom.kind == Node::Kind::kBegin || atom.kind == Node::Kind::kEnd || atom.kind == Node::Kind::kLookahead) {
      return Error("nothing to repeat");
    }
    Node rep;
    rep.kind = Node::Kind::kRepeat;
    rep.min = min;
    rep.max = max;
    if (!AtEnd() && Peek() == '?') {
      rep.greedy = false;
      ++i_;
    } else if (!AtEnd() && Peek() == '+') {
      return Error("possessive quantifiers are not supported");
    }
    if (atom.kind == Node::Kind::kGroup) {
      rep.alternatives = std::move(atom.alternatives);
    } else {
      rep.alternatives.emplace_back();
      rep.alternatives[0].push_back(std::move(atom));
    }
    return rep;
  }

  // Decodes one UTF-8 codepoint of the pattern.
  uint32_t NextCodepoint() {
    const auto b = static_cast<uint8_t>(p_[i_]);
    const size_t len = std::min(Utf8SequenceLength(b), p_.size() - i_);
    const auto cps = DecodeUtf8Lenient(p_.substr(i_, len));
    i_ += len;
    return cps.empty() ? kReplacementCharacter : cps[0];
  }

  static void AddCase(CharSet* set, uint32_t lo, uint32_t hi) {
    for (uint32_t c = std::max<uint32_t>(lo, 'A'); c <= std::min<uint32_t>(hi, 'Z'); ++c) {
      set->ranges.emplace_back(c + 32, c + 32);
    }
    for (uint32_t c = std::max<uint32_t>(lo, 'a'); c <= std::min<uint32_t>(hi, 'z'); ++c) {
      set->ranges.emplace_back(c - 32, c - 32);
    }
  }

  absl::StatusOr<int> HexDigits(int n) {
    int v = 0;
    for (int k = 0; k < n; ++k) {
      if (AtEnd()) return Error("truncated hex escape");
      const char c = Peek();
      int d;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        return Error("bad hex escape");
      v = v * 16 + d;
      ++i_;
    }
    return v;
  }

  // After a backslash: adds the escape's codepoints to `set`. Returns the
  // single codepoint it stands for (usable as a range end), or -1 for a class.
  absl::StatusOr<int64_t> ParseEscape(CharSet* set) {
    if (AtEnd()) return Error("trailing backslash");
    const char c = Peek();
    ++i_;
    switch (c) {
      case 'p':
      case 'P': {
        if (AtEnd() || Peek() != '{') return Error("expected '{' after \\p");
        const size_t close = p_.find('}', i_);
        if (close == std::string_view::npos) return Error("unterminated \\p{");
        const std::string_view name = p_.substr(i_ + 1, close - i_ - 1);
        i_ = close + 1;
        int cat;
        if (name == "L")
          cat = static_cast<int>(UnicodeCategory::kLetter);
        else if (name == "N")
          cat = static_cast<int>(UnicodeCategory::kNumber);
        else if (name == "M")
          cat = static_cast<int>(UnicodeCategory::kMark);
        else if (name == "P")
          cat = static_cast<int>(UnicodeCategory::kPunctuation);
        else if (name == "S")
          cat = static_cast<int>(UnicodeCategory::kSymbol);
        else if (name == "Z")
          cat = static_cast<int>(UnicodeCategory::kSeparator);
        else if (name == "C")
          cat = static_cast<int>(UnicodeCategory::kOther);
        else
          return Error(absl::StrFormat("unsupported property \\p{%s}", name));
        const uint8_t bit = static_cast<uint8_t>(1u << cat);
        set->categories |= c == 'p' ? bit : static_cast<uint8_t>(0x7F & ~bit);
        return -1;
      }
      case 's':
        set->whitespace = true;
        return -1;
      case 'S':
        set->non_whitespace = true;
        return -1;
      case 'd':
        set->ranges.emplace_back('0', '9');
        return -1;
      case 'w':
        set->ranges.emplace_back('0', '9');
        set->ranges.emplace_back('A', 'Z');
        set->ranges.emplace_back('a', 'z');
        set->ranges.emplace_back('_', '_');
        return -1;
      case 'D':
      case 'W':
      case 'b':
      case 'B':
        return Error(absl::StrFormat("unsupported escape \\%c", c));
      case 'r':
        return int64_t{'\r'};
      case 'n':
        return int64_t{'\n'};
      case 't':
        return int64_t{'\t'};
      case 'f':
        return int64_t{'\f'};
      case 'v':
        return int64_t{'\v'};
      case '0':
        return int64_t{0};
      case 'x': {
        auto v = HexDigits(2);
        if (!v.ok()) return v.status();
        return int64_t{*v};
      }
      case 'u': {
        auto v = HexDigits(4);
        if (!v.ok()) return v.status();
        return int64_t{*v};
      }
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
          return Error(absl::StrFormat("unsupported escape \\%c", c));
        }
        if (static_cast<uint8_t>(c) >= 0x80) {
          --i_;
          return int64_t{NextCodepoint()};
        }
        return int64_t{static_cast<uint8_t>(c)};
    }
  }

  absl::StatusOr<Node> ParseClass(bool icase) {
    Node node;
    CharSet& set = node.set;
    if (!AtEnd() && Peek() == '^') {
      set.negated = true;
      ++i_;
    }
    bool first = true;
    while (true) {
      if (AtEnd()) return Error("unterminated '['");
      if (Peek() == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      int64_t lo;
      if (Peek() == '\\') {
        ++i_;
        auto e = ParseEscape(&set);
        if (!e.ok()) return e.status();
        lo = *e;
      } else if (Peek() == '[') {
        return Error("nested classes are not supported");
      } else {
        lo = NextCodepoint();
      }
      if (lo < 0) continue;  // a class escape
      int64_t hi = lo;
      if (i_ + 1 < p_.size() && Peek() == '-' && p_[i_ + 1] != ']') {
        ++i_;
        if (Peek() == '\\') {
          ++i_;
          CharSet dummy;
          auto e = ParseEscape(&dummy);
          if (!e.ok()) return e.status();
          if (*e < 0) return Error("class escape as range end");
          hi = *e;
        } else {
          hi = NextCodepoint();
        }
        if (hi < lo) return Error("reversed range");
      }
      set.ranges.emplace_back(static_cast<uint32_t>(lo), static_cast<uint32_t>(hi));
      if (icase) AddCase(&set, static_cast<uint32_t>(lo), static_cast<uint32_t>(hi));
    }
    set.Finish();
    return node;
  }

  absl::StatusOr<Node> ParseAtom(bool icase) {
    const char c = Peek();
    Node node;
    switch (c) {
      case '(': {
        ++i_;
        bool lookahead = false, negative = false, group_icase = icase;
        if (!AtEnd() && Peek() == '?') {
          ++i_;
          if (AtEnd()) return Error("truncated group");
          const char k = Peek();
          ++i_;
          if (k == ':') {
          } else if (k == '=' || k == '!') {
            lookahead = true;
            negative = k == '!';
          } else if (k == 'i' && !AtEnd() && Peek() == ':') {
            ++i_;
            group_icase = true;
          } else {
            return Error("unsupported group type");
          }
        }
        auto alts = ParseAlternatives(group_icase);
        if (!alts.ok()) return alts.status();
        if (AtEnd() || Peek() != ')') return Error("missing ')'");
        ++i_;
        node.kind = lookahead ? Node::Kind::kLookahead : Node::Kind::kGroup;
        node.negative = negative;
        node.alternatives = *std::move(alts);
        return node;
      }
      case '[':
        ++i_;
        return ParseClass(icase);
      case '.':
        ++i_;
        node.set.any_but_newline = true;
        node.set.Finish();
        return node;
      case '^':
        ++i_;
        node.kind = Node::Kind::kBegin;
        return node;
      case '$':
        ++i_;
        node.kind = Node::Kind::kEnd;
        return node;
      case '*':
      case '+':
      case '?':
        return Error("nothing to repeat");
      case '\\': {
        ++i_;
        auto e = ParseEscape(&node.set);
        if (!e.ok()) return e.status();
        if (*e >= 0) {
          node.set.ranges.emplace_back(static_cast<uint32_t>(*e), static_cast<uint32_t>(*e));
          if (icase) AddCase(&node.set, static_cast<uint32_t>(*e), static_cast<uint32_t>(*e));
        }
        node.set.Finish();
        return node;
      }
      default: {
        const uint32_t cp = NextCodepoint();
        node.set.ranges.emplace_back(cp, cp);
        if (icase) AddCase(&node.set, cp, cp);
        node.set.Finish();
        return node;
      }
    }
  }

  std::string_view p_;
  size_t i_ = 0;
};

using StartFilter = UnicodeRegex::StartFilter;

StartFilter AnyStart() {
  StartFilter f;
  f.any = true;
  return f;
}

void Union(StartFilter* into, const StartFilter& f) {
  into->any |= f.any;
  into->ascii[0] |= f.ascii[0];
  into->ascii[1] |= f.ascii[1];
  into->by_flags |= f.by_flags;
}

StartFilter SetStart(const CharSet& set) {
  StartFilter f;
  for (uint32_t c = 0; c < 128; ++c) {
    if (set.ascii[c]) f.ascii[c >> 6] |= uint64_t{1} << (c & 63);
  }
  bool non_ascii_ranges = false;
  for (const auto& [lo, hi] : set.ranges) non_ascii_ranges |= hi >= 128;
  for (int flags = 0; flags < 16; ++flags) {
    const int cat = flags & 0x07;
    const bool ws = (flags & unicode_internal::kWhitespaceBit) != 0;
    bool in =
        ((set.categories >> cat) & 1) || (set.whitespace && ws) || (set.non_whitespace && !ws) || set.any_but_newline;
    in = non_ascii_ranges || (in != set.negated);
    if (in) f.by_flags |= static_cast<uint16_t>(1u << flags);
  }
  return f;
}

// The codepoints that can start a match of seq[idx..] (conservative).
StartFilter FirstOf(const Seq& seq, size_t idx, int depth = 0) {
  if (idx >= seq.size() || depth > 64) return AnyStart();
  const Node& n = seq[idx];
  switch (n.kind) {
    case Node::Kind::kSet:
      return SetStart(n.set);
    case Node::Kind::kGroup:
    case Node::Kind::kRepeat: {
      StartFilter f;
      for (const Seq& alt : n.alternatives) Union(&f, FirstOf(alt, 0, depth + 1));
      if (n.kind == Node::Kind::kRepeat && n.min == 0) Union(&f, FirstOf(seq, idx + 1, depth + 1));
      return f;
    }
    case Node::Kind::kLookahead:
    case Node::Kind::kBegin:
    case Node::Kind::kEnd:
      return FirstOf(seq, idx + 1, depth + 1);  // they consume nothing
  }
  return AnyStart();
}

bool MayStart(const StartFilter& f, uint32_t cp) {
  if (f.any) return true;
  if (cp < 128) return (f.ascii[cp >> 6] >> (cp & 63)) & 1;
  return (f.by_flags >> (CodepointFlags(cp) & 0x0F)) & 1;
}

// One backtracking match attempt. Continuations are an explicit linked list of
// frames on the C++ stack.
class Matcher {
 public:
  Matcher(std::span<const uint32_t> text, size_t begin, size_t end) : t_(text.data()), begin_(begin), end_(end) {}

  int64_t Run(const Node& root, const std::vector<StartFilter>& filters, size_t pos) {
    start_ = pos;
    Frame final_frame;
    final_frame.kind = Frame::kFinal;
    for (size_t a = 0; a < root.alternatives.size(); ++a) {
      if (pos < end_ && !MayStart(filters[a], t_[pos])) continue;
      if (MatchSeq(root.alternatives[a], 0, pos, &final_frame)) {
        return static_cast<int64_t>(match_end_ - pos);
      }
    }
    return -1;
  }

 private:
  struct Frame {
    enum Kind { kSeq, kRepeat, kFinal, kAccept };
    Kind kind = kSeq;
    const Seq* seq = nullptr;  // kSeq: continue here
    size_t idx = 0;
    const Node* rep = nullptr;  // kRepeat: an iteration of rep ended
    int count = 0;              // iterations done, including this one
    size_t iter_start = 0;
    const Frame* parent = nullptr;
  };

  struct DepthGuard {
    explicit DepthGuard(int* d) : d_(d) { ++*d_; }
    ~DepthGuard() { --*d_; }
    int* d_;
  };

  bool Continue(const Frame* f, size_t pos) {
    switch (f->kind) {
      case Frame::kFinal:
        if (pos == start_) return false;  // only non-empty matches count
        match_end_ = pos;
        return true;
      case Frame::kAccept:
        return true;
      case Frame::kRepeat:
        return RepeatStep(*f->rep, f->count, pos, f->iter_start, f->parent);
      case Frame::kSeq:
        return MatchSeq(*f->seq, f->idx, pos, f->parent);
    }
    return false;
  }

  bool RepeatStep(const Node& rep, int count, size_t pos, size_t iter_start, const Frame* k) {
    if (count > 0 && pos == iter_start) return count >= rep.min && Continue(k, pos);
    auto more = [&]() {
      if (count >= rep.max) return false;
      Frame after;
      after.kind = Frame::kRepeat;
      after.rep = &rep;
      after.count = count + 1;
      after.iter_start = pos;
      after.parent = k;
      for (const Seq& alt : rep.alternatives) {
        if (MatchSeq(alt, 0, pos, &after)) return true;
      }
      return false;
    };
    if (rep.greedy) {
      if (more()) return true;
      return count >= rep.min && Continue(k, pos);
    }
    if (count >= rep.min && Continue(k, pos)) return true;
    return more();
  }

  bool MatchSeq(const Seq& seq, size_t idx, size_t pos, const Frame* k) {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxDepth) return false;
    while (idx < seq.size()) {
      const Node& n = seq[idx];
      switch (n.kind) {
        case Node::Kind::kSet:
          if (pos < end_ && n.set.Matches(t_[pos])) {
            ++pos;
            ++idx;
            continue;
          }
          return false;
        case Node::Kind::kBegin:
          if (pos != begin_) return false;
          ++idx;
          continue;
        case Node::Kind::kEnd:
          if (pos != end_) return false;
          ++idx;
          continue;
        case Node::Kind::kLookahead: {
          Frame accept;
          accept.kind = Frame::kAccept;
          bool found = false;
          for (const Seq& alt : n.alternatives) {
            if (MatchSeq(alt, 0, pos, &accept)) {
              found = true;
              break;
            }
          }
          if (found == n.negative) return false;
          ++idx;
          continue;
        }
        case Node::Kind::kGroup: {
          Frame next;
          next.seq = &seq;
          next.idx = idx + 1;
          next.parent = k;
          for (const Seq& alt : n.alternatives) {
            if (MatchSeq(alt, 0, pos, &next)) return true;
          }
          return false;
        }
        case Node::Kind::kRepeat: {
          if (n.IsSingleSet()) {
            const CharSet& set = n.alternatives[0][0].set;
            size_t run = 0;
            const size_t limit = n.max == kUnbounded ? end_ - pos : std::min<size_t>(n.max, end_ - pos);
            if (n.greedy) {
              while (run < limit && set.Matches(t_[pos + run])) ++run;
              if (run < static_cast<size_t>(n.min)) return false;
              for (size_t r = run + 1; r-- > static_cast<size_t>(n.min);) {
                if (MatchSeq(seq, idx + 1, pos + r, k)) return true;
              }
              return false;
            }
            for (size_t r = 0;; ++r) {
              if (r >= static_cast<size_t>(n.min) && MatchSeq(seq, idx + 1, pos + r, k)) {
                return true;
              }
              if (r >= limit || !set.Matches(t_[pos + r])) return false;
            }
          }
          Frame next;
          next.seq = &seq;
          next.idx = idx + 1;
          next.parent = k;
          return RepeatStep(n, 0, pos, pos, &next);
        }
      }
    }
    return Continue(k, pos);
  }

  const uint32_t* t_;
  size_t begin_, end_;
  size_t start_ = 0;
  size_t match_end_ = 0;
  int depth_ = 0;
};

}  // namespace

UnicodeRegex::UnicodeRegex(UnicodeRegex&&) noexcept = default;
UnicodeRegex& UnicodeRegex::operator=(UnicodeRegex&&) noexcept = default;
UnicodeRegex::~UnicodeRegex() = default;

absl::StatusOr<UnicodeRegex> UnicodeRegex::Compile(std::string_view pattern) {
  Parser parser(pattern);
  auto root = parser.Parse();
  if (!root.ok()) return root.status();
  UnicodeRegex re;
  re.pattern_ = std::string(pattern);
  re.root_ = std::make_unique<Node>(*std::move(root));
  for (const Seq& alt : re.root_->alternatives) re.filters_.push_back(FirstOf(alt, 0));
  return re;
}

int64_t UnicodeRegex::MatchAt(std::span<const uint32_t> text, size_t begin, size_t end, size_t pos) const {
  Matcher m(text, begin, end);
  return m.Run(*root_, filters_, pos);
}

void UnicodeRegex::Split(std::span<const uint32_t> text, std::span<const size_t> pieces,
                         std::vector<size_t>* out) const {
  size_t begin = 0;
  for (const size_t len : pieces) {
    const size_t end = begin + len;
    Matcher m(text, begin, end);
    size_t last = begin;
    size_t pos = begin;
    while (pos < end) {
      const int64_t n = m.Run(*root_, filters_, pos);
      if (n > 0) {
        if (pos > last) out->push_back(pos - last);
        out->push_back(static_cast<size_t>(n));
        pos += static_cast<size_t>(n);
        last = pos;
      } else {
        ++pos;
      }
    }
    if (end > last) out->push_back(end - last);
    begin = end;
  }
}

}  // namespace cairn
