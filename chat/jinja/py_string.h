// Python's str operations on UTF-8 strings, character-exact (py_unicode.h):
// case mappings, strip, split, find, replace, padding. Indices and counts
// are in characters, as Python's. Stateless and thread-safe.
#ifndef CAIRN_CHAT_JINJA_PY_STRING_H_
#define CAIRN_CHAT_JINJA_PY_STRING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::jinja {

std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
// str.title(): each run of cased characters starts title-cased.
std::string PyTitle(std::string_view s);
// str.capitalize(): the first character title-cased, the rest lowercased.
std::string PyCapitalize(std::string_view s);
std::string PySwapcase(std::string_view s);

// str.strip / lstrip / rstrip; `chars` unset strips whitespace.
std::string_view PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);

// str.split / rsplit; `sep` unset splits on runs of whitespace and drops
// empty parts; maxsplit < 0 is no limit. An empty sep is the caller's
// ValueError.
std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> PyRSplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> PySplitLines(std::string_view s, bool keepends);

// Python slice bounds [start, end) over `length` characters, normalized as
// str.find does (negative from the end, clamped).
void PyClampRange(int64_t length, std::optional<int64_t> start, std::optional<int64_t> end, int64_t* begin_out,
                  int64_t* end_out);
// str.find / rfind: character index or -1.
int64_t PyFind(std::string_view s, std::string_view sub, std::optional<int64_t> start, std::optional<int64_t> end,
               bool reverse);
int64_t PyCount(std::string_view s, std::string_view sub, std::optional<int64_t> start, std::optional<int64_t> end);
// The characters [begin, end) (already clamped) as bytes.
std::string_view PySubstr(std::string_view s, int64_t begin, int64_t end);
// The size str.replace's result would have (to bound it before building).
size_t PyReplacedSize(std::string_view s, std::string_view old, std::string_view replacement, int64_t count);
std::string PyReplace(std::string_view s, std::string_view old, std::string_view replacement, int64_t count);
// str.center / ljust / rjust (fill is one character).
std::string PyPad(std::string_view s, int64_t width, std::string_view fill, char align);
std::string PyZfill(std::string_view s, int64_t width);

// All characters satisfy the PyCharFlag mask (and the string is not empty).
bool PyAllChars(std::string_view s, uint16_t mask);
// str.islower / isupper / istitle.
bool PyIsLower(std::string_view s);
bool PyIsUpper(std::string_view s);
bool PyIsTitle(std::string_view s);

// markupsafe.escape: & < > " ' as HTML entities.
std::string HtmlEscape(std::string_view s);

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_PY_STRING_H_
