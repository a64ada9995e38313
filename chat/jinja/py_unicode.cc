#include "chat/jinja/py_unicode.h"

#include <algorithm>

#include "backends/model/unicode.h"

namespace cairn::jinja {

namespace {

using py_unicode_internal::CaseMapping;

void AppendMapped(const CaseMapping* table, int size, uint32_t cp, std::string* out) {
  const CaseMapping* end = table + size;
  const CaseMapping* it = std::lower_bound(table, end, cp, [](const CaseMapping& m, uint32_t c) { return m.cp < c; });
  if (it != end && it->cp == cp) {
    out->append(it->utf8);
  } else {
    AppendUtf8(cp, out);
  }
}

// Decodes the character at `offset`: its codepoint and length; a byte that
// starts no valid sequence (RFC 3629) is one character, U+FFFD.
PyChar DecodeAt(std::string_view s, size_t offset) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t lead = byte(offset);
  if (lead < 0x80) return {lead, offset, 1};
  size_t n = 0;
  uint32_t cp = 0;
  uint32_t min = 0;
  if ((lead & 0xE0) == 0xC0) {
    n = 2, cp = lead & 0x1F, min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    n = 3, cp = lead & 0x0F, min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    n = 4, cp = lead & 0x07, min = 0x10000;
  } else {
    return {0xFFFD, offset, 1};
  }
  if (offset + n > s.size()) return {0xFFFD, offset, 1};
  for (size_t k = 1; k < n; ++k) {
    const uint8_t c = byte(offset + k);
    if ((c & 0xC0) != 0x80) return {0xFFFD, offset, 1};
    cp = (cp << 6) | (c & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {0xFFFD, offset, 1};
  return {cp, offset, n};
}

bool IsAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<uint8_t>(c) < 0x80; });
}

}  // namespace

uint16_t PyCharFlags(uint32_t cp) {
  using py_unicode_internal::FlagRange;
  const FlagRange* begin = py_unicode_internal::kFlagRanges;
  const FlagRange* end = begin + py_unicode_internal::kFlagRangesSize;
  const FlagRange* it = std::upper_bound(begin, end, cp, [](uint32_t c, const FlagRange& r) { return c < r.start; });
  return it == begin ? 0 : (it - 1)->flags;
}

void AppendUpper(uint32_t cp, std::string* out) {
  AppendMapped(py_unicode_internal::kUpper, py_unicode_internal::kUpperSize, cp, out);
}
void AppendLower(uint32_t cp, std::string* out) {
  AppendMapped(py_unicode_internal::kLower, py_unicode_internal::kLowerSize, cp, out);
}
void AppendTitle(uint32_t cp, std::string* out) {
  AppendMapped(py_unicode_internal::kTitle, py_unicode_internal::kTitleSize, cp, out);
}

std::vector<PyChar> PyChars(std::string_view s) {
  std::vector<PyChar> chars;
  chars.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const PyChar c = DecodeAt(s, i);
    chars.push_back(c);
    i += c.size;
  }
  return chars;
}

size_t PyLength(std::string_view s) {
  if (IsAscii(s)) return s.size();
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) i += DecodeAt(s, i).size;
  return n;
}

size_t PyByteOffset(std::string_view s, size_t index) {
  size_t i = 0;
  for (size_t n = 0; n < index && i < s.size(); ++n) i += DecodeAt(s, i).size;
  return i;
}

size_t PyCharIndex(std::string_view s, size_t offset) {
  size_t n = 0;
  for (size_t i = 0; i < offset && i < s.size(); ++n) i += DecodeAt(s, i).size;
  return n;
}

}  // namespace cairn::jinja
