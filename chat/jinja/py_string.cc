#include "chat/jinja/py_string.h"

#include <algorithm>

#include "backends/model/unicode.h"
#include "chat/jinja/py_unicode.h"

namespace cairn::jinja {

namespace {

template <typename Fn>
std::string MapChars(std::string_view s, Fn fn) {
  std::string out;
  out.reserve(s.size());
  for (const PyChar& c : PyChars(s)) {
    if (c.cp == 0xFFFD && c.size == 1) {
      out.append(s.substr(c.offset, 1));  // a byte that is no character stays as it is
    } else {
      fn(c.cp, &out);
    }
  }
  return out;
}

bool IsLineBreak(uint32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e || cp == 0x85 ||
         cp == 0x2028 || cp == 0x2029;
}

}  // namespace

std::string PyUpper(std::string_view s) { return MapChars(s, AppendUpper); }

// str.lower(), with its final sigma: a capital sigma after a cased letter
// and not before one (case-ignorable characters between) becomes ς.
std::string PyLower(std::string_view s) {
  const std::vector<PyChar> cs = PyChars(s);
  std::string out;
  out.reserve(s.size());
  const auto cased_beyond = [&](size_t i, int step) {
    for (int64_t j = static_cast<int64_t>(i) + step; j >= 0 && j < static_cast<int64_t>(cs.size()); j += step) {
      if ((PyCharFlags(cs[j].cp) & kPyCaseIgnorable) == 0) return PyIsCased(cs[j].cp);
    }
    return false;
  };
  for (size_t i = 0; i < cs.size(); ++i) {
    if (cs[i].cp == 0xFFFD && cs[i].size == 1) {
      out.append(s.substr(cs[i].offset, 1));
    } else if (cs[i].cp == 0x03A3 && cased_beyond(i, -1) && !cased_beyond(i, 1)) {
      AppendUtf8(0x03C2, &out);
    } else {
      AppendLower(cs[i].cp, &out);
    }
  }
  return out;
}

namespace {

// Title-cases the characters `title(index, previous_cased)` picks and
// lowercases the others.
template <typename Pick>
std::string TitleWhere(std::string_view s, Pick title) {
  bool previous_cased = false;
  size_t index = 0;
  return MapChars(s, [&](uint32_t cp, std::string* out) {
    if (title(index++, previous_cased)) {
      AppendTitle(cp, out);
    } else {
      AppendLower(cp, out);
    }
    previous_cased = PyIsCased(cp);
  });
}

}  // namespace

std::string PyTitle(std::string_view s) {
  return TitleWhere(s, [](size_t, bool previous_cased) { return !previous_cased; });
}

std::string PyCapitalize(std::string_view s) {
  return TitleWhere(s, [](size_t index, bool) { return index == 0; });
}

std::string PySwapcase(std::string_view s) {
  return MapChars(s, [](uint32_t cp, std::string* out) {
    const uint16_t f = PyCharFlags(cp);
    if (f & kPyUpper) {
      AppendLower(cp, out);
    } else if (f & kPyLower) {
      AppendUpper(cp, out);
    } else {
      AppendUtf8(cp, out);
    }
  });
}

std::string_view PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  std::vector<uint32_t> set;
  if (chars.has_value()) {
    for (const PyChar& c : PyChars(*chars)) set.push_back(c.cp);
  }
  const auto strip = [&](uint32_t cp) {
    return chars.has_value() ? std::find(set.begin(), set.end(), cp) != set.end() : PyIsSpace(cp);
  };
  const std::vector<PyChar> cs = PyChars(s);
  size_t b = 0;
  size_t e = cs.size();
  if (left) {
    while (b < e && strip(cs[b].cp)) ++b;
  }
  if (right) {
    while (e > b && strip(cs[e - 1].cp)) --e;
  }
  if (b == e) return s.substr(0, 0);
  return s.substr(cs[b].offset, cs[e - 1].offset + cs[e - 1].size - cs[b].offset);
}

std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep.has_value()) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  const std::vector<PyChar> cs = PyChars(s);
  size_t i = 0;
  while (true) {
    while (i < cs.size() && PyIsSpace(cs[i].cp)) ++i;
    if (i == cs.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.emplace_back(s.substr(cs[i].offset));  // the rest, as it is
      break;
    }
    const size_t begin = i;
    while (i < cs.size() && !PyIsSpace(cs[i].cp)) ++i;
    parts.emplace_back(s.substr(cs[begin].offset, cs[i - 1].offset + cs[i - 1].size - cs[begin].offset));
  }
  return parts;
}

std::vector<std::string> PyRSplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (maxsplit < 0) return PySplit(s, sep, maxsplit);
  std::vector<std::string> parts;
  if (sep.has_value()) {
    size_t end = s.size();
    while (static_cast<int64_t>(parts.size()) < maxsplit && end >= sep->size()) {
      const size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      parts.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    parts.emplace_back(s.substr(0, end));
  } else {
    const std::vector<PyChar> cs = PyChars(s);
    size_t i = cs.size();
    while (true) {
      while (i > 0 && PyIsSpace(cs[i - 1].cp)) --i;
      if (i == 0) break;
      if (static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.emplace_back(s.substr(0, cs[i - 1].offset + cs[i - 1].size));  // the rest, as it is
        break;
      }
      const size_t end = i;
      while (i > 0 && !PyIsSpace(cs[i - 1].cp)) --i;
      parts.emplace_back(s.substr(cs[i].offset, cs[end - 1].offset + cs[end - 1].size - cs[i].offset));
    }
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> PySplitLines(std::string_view s, bool keepends) {
  std::vector<std::string> lines;
  const std::vector<PyChar> cs = PyChars(s);
  size_t begin = 0;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (!IsLineBreak(cs[i].cp)) continue;
    size_t end = i + 1;
    if (cs[i].cp == '\r' && i + 1 < cs.size() && cs[i + 1].cp == '\n') ++end;
    const size_t line_end = keepends ? end : i;
    const size_t from = begin < cs.size() ? cs[begin].offset : s.size();
    const size_t to = line_end < cs.size() ? cs[line_end].offset : s.size();
    lines.emplace_back(s.substr(from, to - from));
    begin = end;
    i = end - 1;
  }
  if (begin < cs.size()) lines.emplace_back(s.substr(cs[begin].offset));
  return lines;
}

void PyClampRange(int64_t length, std::optional<int64_t> start, std::optional<int64_t> end, int64_t* begin_out,
                  int64_t* end_out) {
  int64_t b = start.value_or(0);
  int64_t e = end.value_or(length);
  if (b < 0) b = std::max<int64_t>(0, b + length);
  if (e < 0) e = std::max<int64_t>(0, e + length);
  *begin_out = std::min(b, length);
  *end_out = std::min(e, length);
}

std::string_view PySubstr(std::string_view s, int64_t begin, int64_t end) {
  if (end <= begin) return s.substr(0, 0);
  const std::vector<PyChar> cs = PyChars(s);
  const size_t from = static_cast<size_t>(begin) < cs.size() ? cs[begin].offset : s.size();
  const size_t to = static_cast<size_t>(end) < cs.size() ? cs[end].offset : s.size();
  return s.substr(from, to - from);
}

int64_t PyFind(std::string_view s, std::string_view sub, std::optional<int64_t> start, std::optional<int64_t> end,
               bool reverse) {
  const std::vector<PyChar> cs = PyChars(s);
  int64_t b = 0;
  int64_t e = 0;
  PyClampRange(static_cast<int64_t>(cs.size()), start, end, &b, &e);
  if (start.value_or(0) > static_cast<int64_t>(cs.size())) return -1;
  if (e < b) return sub.empty() && e == b ? b : -1;
  const std::string_view window = PySubstr(s, b, e);
  const size_t at = reverse ? window.rfind(sub) : window.find(sub);
  if (at == std::string_view::npos) return -1;
  return b + static_cast<int64_t>(PyChars(window.substr(0, at)).size());
}

int64_t PyCount(std::string_view s, std::string_view sub, std::optional<int64_t> start, std::optional<int64_t> end) {
  const int64_t length = static_cast<int64_t>(PyChars(s).size());
  int64_t b = 0;
  int64_t e = 0;
  PyClampRange(length, start, end, &b, &e);
  if (b > e) return 0;
  const std::string_view window = PySubstr(s, b, e);
  if (sub.empty()) return static_cast<int64_t>(PyChars(window).size()) + 1;
  int64_t n = 0;
  for (size_t at = window.find(sub); at != std::string_view::npos; at = window.find(sub, at + sub.size())) ++n;
  return n;
}

size_t PyReplacedSize(std::string_view s, std::string_view old, std::string_view replacement, int64_t count) {
  int64_t n = 0;
  if (old.empty()) {
    n = static_cast<int64_t>(PyChars(s).size()) + 1;
  } else {
    for (size_t at = s.find(old); at != std::string_view::npos; at = s.find(old, at + old.size())) ++n;
  }
  if (count >= 0) n = std::min(n, count);
  return s.size() + static_cast<size_t>(n) * replacement.size() - static_cast<size_t>(n) * old.size();
}

std::string PyReplace(std::string_view s, std::string_view old, std::string_view replacement, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    const std::vector<PyChar> cs = PyChars(s);
    size_t i = 0;
    for (; i <= cs.size(); ++i) {
      if (count >= 0 && done >= count) break;
      out.append(replacement);
      ++done;
      if (i < cs.size()) out.append(s.substr(cs[i].offset, cs[i].size));
    }
    if (i < cs.size()) out.append(s.substr(cs[i].offset));
    return out;
  }
  size_t start = 0;
  for (size_t at = s.find(old); at != std::string_view::npos && (count < 0 || done < count); at = s.find(old, start)) {
    out.append(s.substr(start, at - start));
    out.append(replacement);
    start = at + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

std::string PyPad(std::string_view s, int64_t width, std::string_view fill, char align) {
  const int64_t length = static_cast<int64_t>(PyChars(s).size());
  if (width <= length) return std::string(s);
  const int64_t pad = width - length;
  int64_t left = 0;
  if (align == '>') {
    left = pad;
  } else if (align == '^') {
    // Python's center puts the odd space on the right unless both are odd.
    left = pad / 2 + (pad & width & 1);
  }
  std::string out;
  for (int64_t i = 0; i < left; ++i) out.append(fill);
  out.append(s);
  for (int64_t i = left; i < pad; ++i) out.append(fill);
  return out;
}

std::string PyZfill(std::string_view s, int64_t width) {
  const int64_t length = static_cast<int64_t>(PyChars(s).size());
  if (width <= length) return std::string(s);
  const size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
  return std::string(s.substr(0, sign)) + std::string(width - length, '0') + std::string(s.substr(sign));
}

bool PyAllChars(std::string_view s, uint16_t mask) {
  if (s.empty()) return false;
  for (const PyChar& c : PyChars(s)) {
    if ((PyCharFlags(c.cp) & mask) == 0) return false;
  }
  return true;
}

namespace {

// Some character has `want` and none has `reject` (str.islower / isupper).
bool CasedAs(std::string_view s, uint16_t want, uint16_t reject) {
  bool cased = false;
  for (const PyChar& c : PyChars(s)) {
    const uint16_t f = PyCharFlags(c.cp);
    if (f & reject) return false;
    cased |= (f & want) != 0;
  }
  return cased;
}

}  // namespace

bool PyIsLower(std::string_view s) { return CasedAs(s, kPyLower, kPyUpper | kPyTitle); }
bool PyIsUpper(std::string_view s) { return CasedAs(s, kPyUpper, kPyLower | kPyTitle); }

bool PyIsTitle(std::string_view s) {
  bool cased = false;
  bool previous_cased = false;
  for (const PyChar& c : PyChars(s)) {
    const uint16_t f = PyCharFlags(c.cp);
    if (f & (kPyUpper | kPyTitle)) {
      if (previous_cased) return false;
      previous_cased = cased = true;
    } else if (f & kPyLower) {
      if (!previous_cased) return false;
      previous_cased = cased = true;
    } else {
      previous_cased = false;
    }
  }
  return cased;
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace cairn::jinja
