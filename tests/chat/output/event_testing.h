// Reading a parser's events as a client does (adjacent text of one kind is
// one text), and checking text is whole UTF-8. No gtest: the fuzz target
// uses it too.
#ifndef CAIRN_TESTS_CHAT_OUTPUT_EVENT_TESTING_H_
#define CAIRN_TESTS_CHAT_OUTPUT_EVENT_TESTING_H_

#include <cstddef>
#include <string_view>
#include <vector>

#include "chat/output/output_parser.h"

namespace cairn::chat::output::testing {

// Adjacent text events of one kind merged: how they read concatenated.
inline std::vector<OutputEvent> Merged(const std::vector<OutputEvent>& events) {
  std::vector<OutputEvent> out;
  for (const OutputEvent& e : events) {
    if (!out.empty() && e.kind != OutputEvent::Kind::kToolCall && out.back().kind == e.kind) {
      out.back().text += e.text;
    } else {
      out.push_back(e);
    }
  }
  return out;
}

inline bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80                     ? 1
                     : (c >> 5) == 6 && c >= 0xC2 ? 2
                     : (c >> 4) == 14             ? 3
                     : c >= 0xF0 && c <= 0xF4     ? 4
                                                  : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

}  // namespace cairn::chat::output::testing

#endif  // CAIRN_TESTS_CHAT_OUTPUT_EVENT_TESTING_H_
