#include "chat/output/grammar_parser.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace cairn::chat::output {
namespace {

constexpr std::string_view kSpace = " \t\n\r";

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

enum class Match { kNone, kPartial, kFull };

struct MatchResult {
  Match match = Match::kNone;
  size_t length = 0;
};

// Whether exit's marker matches text at pos: fully (and how many bytes), or
// only as far as text goes (undecided until more arrives), or not at all.
MatchResult MatchAt(const Exit& exit, std::string_view text, size_t pos) {
  const std::string& marker = exit.marker;
  if (!exit.flexible_space) {
    const size_t n = std::min(marker.size(), text.size() - pos);
    if (text.compare(pos, n, marker, 0, n) != 0) return {};
    return n == marker.size() ? MatchResult{Match::kFull, n} : MatchResult{Match::kPartial, 0};
  }
  size_t i = pos;
  for (char c : marker) {
    if (c == ' ') {
      while (i < text.size() && IsSpace(text[i])) ++i;
      if (i == text.size()) return {Match::kPartial, 0};
      continue;
    }
    if (i == text.size()) return {Match::kPartial, 0};
    if (text[i] != c) return {};
    ++i;
  }
  return {Match::kFull, i - pos};
}

// The bytes at the end of text that begin a UTF-8 character still missing
// its continuation bytes (0 when text ends on a character boundary or with
// bytes that can never become valid).
size_t IncompleteUtf8Tail(std::string_view text) {
  const size_t look = std::min<size_t>(3, text.size());
  for (size_t k = 1; k <= look; ++k) {
    const auto c = static_cast<unsigned char>(text[text.size() - k]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 1;
    return need > k ? k : 0;
  }
  return 0;
}

// Where a section's exit stands in a text: the longest full match at the
// first position where one matches, unless an exit matches only partially
// (the text ends inside it) at an earlier position; then nothing from that
// position on is decided.
struct ExitSearch {
  const Exit* exit = nullptr;  // a full match
  size_t pos = std::string_view::npos;
  size_t length = 0;
  size_t undecided = std::string_view::npos;  // where a partial match begins
};

class GrammarParser final : public OutputParser {
 public:
  GrammarParser(Grammar grammar, std::function<std::string()> make_id)
      : grammar_(std::move(grammar)),
        make_id_(std::move(make_id)),
        section_(grammar_.start),
        scanner_(section().quoting) {}

  absl::StatusOr<std::vector<OutputEvent>> Feed(std::string_view piece) override {
    if (finished_) return absl::FailedPreconditionError("the reply is already finished");
    buf_.append(piece);
    Drain(/*final=*/false);
    return std::exchange(events_, {});
  }

  absl::StatusOr<FinishedOutput> Finish() override {
    if (finished_) return absl::FailedPreconditionError("the reply is already finished");
    finished_ = true;
    Drain(/*final=*/true);
    FinishedOutput out;
    out.events = std::exchange(events_, {});
    out.has_tool_calls = has_tool_calls_;
    return out;
  }

 private:
  class Reporter final : public CaptureOutput {
   public:
    explicit Reporter(GrammarParser& parser) : parser_(parser) {}
    void Call(ToolCall call) override {
      if (call.id.empty()) call.id = parser_.make_id_();
      OutputEvent event;
      event.kind = OutputEvent::Kind::kToolCall;
      event.tool_call = std::move(call);
      parser_.events_.push_back(std::move(event));
      parser_.has_tool_calls_ = true;
    }
    void Content(std::string_view text) override {
      parser_.Append(OutputEvent::Kind::kContent, text);
      parser_.continues_content_ = !text.empty();
    }

   private:
    GrammarParser& parser_;
  };

  const Section& section() const { return grammar_.sections[static_cast<size_t>(section_)]; }

  void Drain(bool final) {
    while (section().sink == Sink::kCapture ? StepCapture(final) : StepText(final)) {
    }
  }

  ExitSearch FindExit(std::string_view text, bool at_section_start) const {
    ExitSearch found;
    const size_t first_text = at_section_start ? std::min(text.find_first_not_of(kSpace), text.size()) : 0;
    for (size_t pos = 0; pos < text.size(); ++pos) {
      bool partial = false;
      for (const Exit& exit : section().exits) {
        if (exit.only_at_start && (!at_section_start || pos != first_text)) continue;
        const MatchResult m = MatchAt(exit, text, pos);
        if (m.match == Match::kFull && m.length > found.length) {
          found.exit = &exit;
          found.pos = pos;
          found.length = m.length;
        }
        partial = partial || m.match == Match::kPartial;
      }
      if (found.exit != nullptr) return found;
      if (partial) {
        found.undecided = pos;
        return found;
      }
    }
    return found;
  }

  // A text section: emits what is decided; true when it left the section.
  bool StepText(bool final) {
    const ExitSearch found = FindExit(buf_, !started_);
    if (found.exit != nullptr) {
      EmitText(std::string_view(buf_).substr(0, found.pos));
      pending_space_.clear();
      const Exit& exit = *found.exit;
      std::string matched = buf_.substr(found.pos, found.length);
      buf_.erase(0, found.pos + found.length);
      if (exit.keep) {
        buf_.insert(0, matched);
        matched.clear();
      }
      Enter(exit.next, std::move(matched));
      return true;
    }
    size_t end = final ? buf_.size() : std::min(found.undecided, buf_.size());
    if (!final) end -= IncompleteUtf8Tail(std::string_view(buf_).substr(0, end));
    EmitText(std::string_view(buf_).substr(0, end));
    buf_.erase(0, end);
    if (final) pending_space_.clear();
    return false;
  }

  // A capture section: collects the block; true when it ended.
  bool StepCapture(bool final) {
    const Section& s = section();
    capture_.append(buf_);
    buf_.clear();
    size_t i = scanned_;
    for (; i < capture_.size(); ++i) {
      if (!scanner_.in_string()) {
        const ExitSearch found = FindExitAt(i);
        if (found.exit != nullptr) {
          const size_t rest = found.exit->keep ? i : i + found.length;
          const std::string closer = found.exit->keep ? "" : capture_.substr(i, found.length);
          EndCapture(i, rest, closer, /*at_finish=*/false, found.exit->next);
          return true;
        }
        if (found.undecided != std::string_view::npos) break;
      }
      scanner_.Advance(capture_[i]);
      if (s.ends_when_balanced && scanner_.closed()) {
        EndCapture(i + 1, i + 1, "", /*at_finish=*/false, s.next_when_balanced);
        return true;
      }
    }
    scanned_ = i;
    if (!final || (capture_.empty() && opener_.empty())) return false;
    EndCapture(capture_.size(), capture_.size(), "", /*at_finish=*/true, section_);
    return true;
  }

  // The capture section's exits matching at capture_[pos].
  ExitSearch FindExitAt(size_t pos) const {
    ExitSearch found;
    for (const Exit& exit : section().exits) {
      const MatchResult m = MatchAt(exit, capture_, pos);
      if (m.match == Match::kFull && m.length > found.length) {
        found.exit = &exit;
        found.length = m.length;
      } else if (m.match == Match::kPartial) {
        found.undecided = pos;
      }
    }
    if (found.exit != nullptr) found.undecided = std::string_view::npos;
    return found;
  }

  void EndCapture(size_t text_end, size_t rest_begin, const std::string& closer, bool at_finish, int next) {
    const std::string text = capture_.substr(0, text_end);
    buf_ = capture_.substr(rest_begin);
    capture_.clear();
    scanned_ = 0;
    const std::string opener = std::exchange(opener_, {});
    CaptureEnd end{opener, text, closer, at_finish, next};
    Reporter reporter(*this);
    continues_content_ = false;
    Enter(section().on_end(end, reporter), "");
  }

  void Enter(int next, std::string opener) {
    section_ = next;
    // After a block reported as content, the content goes on: whitespace
    // between them is text.
    started_ = std::exchange(continues_content_, false) && section().sink == Sink::kContent;
    pending_space_.clear();
    opener_ = std::move(opener);
    scanner_ = BracketScanner(section().quoting);
  }

  // Text of the current text section, trimmed at the run's edges.
  void EmitText(std::string_view text) {
    const OutputEvent::Kind kind =
        section().sink == Sink::kReasoning ? OutputEvent::Kind::kReasoning : OutputEvent::Kind::kContent;
    if (!section().trim) {
      Append(kind, text);
      return;
    }
    if (!started_) {
      const size_t first = text.find_first_not_of(kSpace);
      if (first == std::string_view::npos) return;
      text.remove_prefix(first);
      started_ = true;
    }
    const size_t last = text.find_last_not_of(kSpace);
    if (last == std::string_view::npos) {
      pending_space_.append(text);
      return;
    }
    Append(kind, pending_space_);
    Append(kind, text.substr(0, last + 1));
    pending_space_.assign(text.substr(last + 1));
  }

  // Adds text to the events, extending the last one when it is of the kind.
  void Append(OutputEvent::Kind kind, std::string_view text) {
    if (text.empty()) return;
    if (!events_.empty() && events_.back().kind == kind) {
      events_.back().text.append(text);
      return;
    }
    OutputEvent event;
    event.kind = kind;
    event.text.assign(text);
    events_.push_back(std::move(event));
  }

  const Grammar grammar_;
  const std::function<std::string()> make_id_;
  int section_;
  std::string buf_;  // input not yet consumed
  // Text sections.
  bool started_ = false;       // the section emitted text
  std::string pending_space_;  // trailing whitespace held back
  // Capture sections.
  std::string opener_;
  std::string capture_;
  size_t scanned_ = 0;  // bytes of capture_ the scanner has seen
  BracketScanner scanner_;

  bool continues_content_ = false;  // the last capture reported content

  std::vector<OutputEvent> events_;
  bool has_tool_calls_ = false;
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<OutputParser> CreateGrammarParser(Grammar grammar, std::function<std::string()> make_id) {
  return std::make_unique<GrammarParser>(std::move(grammar), std::move(make_id));
}

}  // namespace cairn::chat::output
