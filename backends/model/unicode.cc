#include "backends/model/unicode.h"

#include <array>
#include <memory>

namespace cairn {
namespace unicode_internal {

const uint8_t* FlagTable() {
  static const uint8_t* const table = [] {
    auto* t = new uint8_t[kMaxCodepoint + 1];
    for (int i = 0; i < kNumCodepointRanges; ++i) {
      const uint32_t start = kCodepointRanges[i].start;
      const uint32_t end = i + 1 < kNumCodepointRanges ? kCodepointRanges[i + 1].start : kMaxCodepoint + 1;
      for (uint32_t cp = start; cp < end; ++cp) t[cp] = kCodepointRanges[i].flags;
    }
    return t;
  }();
  return table;
}

}  // namespace unicode_internal

UnicodeCategory CategoryOf(uint32_t cp) { return static_cast<UnicodeCategory>(CodepointFlags(cp) & 0x07); }

bool IsWhitespace(uint32_t cp) { return (CodepointFlags(cp) & unicode_internal::kWhitespaceBit) != 0; }

const char* UnicodeTableVersion() { return unicode_internal::kUnicodeVersion; }

size_t Utf8SequenceLength(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  auto cont = [&](size_t k) { return i + k < n && (s[i + k] & 0xC0) == 0x80; };
  while (i < n) {
    const uint8_t b = s[i];
    if (b < 0x80) {
      out.push_back(b);
      i += 1;
    } else if ((b & 0xE0) == 0xC0 && cont(1)) {
      out.push_back((uint32_t{b & 0x1Fu} << 6) | (s[i + 1] & 0x3F));
      i += 2;
    } else if ((b & 0xF0) == 0xE0 && cont(1) && cont(2)) {
      out.push_back((uint32_t{b & 0x0Fu} << 12) | (uint32_t{s[i + 1] & 0x3Fu} << 6) | (s[i + 2] & 0x3F));
      i += 3;
    } else if ((b & 0xF8) == 0xF0 && cont(1) && cont(2) && cont(3)) {
      out.push_back((uint32_t{b & 0x07u} << 18) | (uint32_t{s[i + 1] & 0x3Fu} << 12) |
                    (uint32_t{s[i + 2] & 0x3Fu} << 6) | (s[i + 3] & 0x3F));
      i += 4;
    } else {
      out.push_back(kReplacementCharacter);
      i += 1;
    }
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp > kMaxCodepoint) cp = kReplacementCharacter;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t ValidUtf8PrefixLength(std::string_view bytes) {
  const auto* s = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b = s[i];
    if (b < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b >= 0xC2 && b <= 0xDF) {
      len = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
      len = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      len = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
    }
    i += len;
  }
  return n;
}

namespace {

struct ByteAlphabet {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> to_byte{};  // alphabet codepoints are all < 0x144
  ByteAlphabet() {
    to_byte.fill(-1);
    auto self = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = self(b) ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++);
      to_cp[b] = cp;
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& Alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

}  // namespace

uint32_t ByteToAlphabet(uint8_t byte) { return Alphabet().to_cp[byte]; }

int AlphabetToByte(uint32_t cp) { return cp < 512 ? Alphabet().to_byte[cp] : -1; }

}  // namespace cairn
