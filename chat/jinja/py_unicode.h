// What Python's str methods know of a codepoint: the properties behind
// isprintable, isspace, isalpha, isdigit, islower, ... and the full case
// mappings behind upper, lower and title (from py_unicode_data.cc, generated
// by py_unicode_gen.py from Python's own data), and UTF-8 strings seen as
// Python sees them: sequences of codepoints.
//
// Strings need not be valid UTF-8: a byte that does not start a valid
// sequence counts as one character and is kept as it is, so slicing and
// joining never alter a client's bytes. Stateless and thread-safe.
#ifndef CAIRN_CHAT_JINJA_PY_UNICODE_H_
#define CAIRN_CHAT_JINJA_PY_UNICODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::jinja {

enum PyCharFlag : uint16_t {
  kPyPrintable = 1 << 0,
  kPySpace = 1 << 1,
  kPyAlpha = 1 << 2,
  kPyDecimal = 1 << 3,
  kPyDigit = 1 << 4,
  kPyNumeric = 1 << 5,
  kPyLower = 1 << 6,
  kPyUpper = 1 << 7,
  kPyTitle = 1 << 8,
  kPyCaseIgnorable = 1 << 9,
};

uint16_t PyCharFlags(uint32_t cp);
inline bool PyIsSpace(uint32_t cp) { return (PyCharFlags(cp) & kPySpace) != 0; }
inline bool PyIsCased(uint32_t cp) { return (PyCharFlags(cp) & (kPyLower | kPyUpper | kPyTitle)) != 0; }
inline bool PyIsAlnum(uint32_t cp) { return (PyCharFlags(cp) & (kPyAlpha | kPyDecimal | kPyDigit | kPyNumeric)) != 0; }

// Full case mappings of one codepoint, appended as UTF-8 (ß upper -> "SS");
// backends/model/unicode.h's AppendUtf8 encodes one codepoint.
void AppendUpper(uint32_t cp, std::string* out);
void AppendLower(uint32_t cp, std::string* out);
void AppendTitle(uint32_t cp, std::string* out);

// One character of a string: its codepoint (U+FFFD for a byte that starts no
// valid sequence) and its bytes.
struct PyChar {
  uint32_t cp;
  size_t offset;
  size_t size;
};
// The characters of `s` in order.
std::vector<PyChar> PyChars(std::string_view s);
// Number of characters (len(s) in Python).
size_t PyLength(std::string_view s);
// Byte offset of character `index` (0 <= index <= PyLength(s)).
size_t PyByteOffset(std::string_view s, size_t index);
// Character index of byte offset `offset` (a character boundary).
size_t PyCharIndex(std::string_view s, size_t offset);

namespace py_unicode_internal {
struct FlagRange {
  uint32_t start;
  uint16_t flags;
};
struct CaseMapping {
  uint32_t cp;
  const char* utf8;
};
extern const FlagRange kFlagRanges[];
extern const int kFlagRangesSize;
extern const CaseMapping kUpper[];
extern const int kUpperSize;
extern const CaseMapping kLower[];
extern const int kLowerSize;
extern const CaseMapping kTitle[];
extern const int kTitleSize;
}  // namespace py_unicode_internal

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_PY_UNICODE_H_
