// Unicode helpers for the tokenizers: codepoint classes (general category
// group and White_Space, from the generated unicode_data.cc), lenient UTF-8
// decoding with llama.cpp's conventions, and the GPT-2 byte alphabet.
// Everything here is stateless and thread-safe.
#ifndef CAIRN_BACKENDS_MODEL_UNICODE_H_
#define CAIRN_BACKENDS_MODEL_UNICODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cairn {

// The general category group of a codepoint (the first letter of its
// two-letter category). Every codepoint has exactly one; unassigned ones are
// kOther (Cn), like surrogates and private use.
enum class UnicodeCategory : uint8_t {
  kOther = 0,        // \p{C}
  kLetter = 1,       // \p{L}
  kNumber = 2,       // \p{N}
  kMark = 3,         // \p{M}
  kPunctuation = 4,  // \p{P}
  kSymbol = 5,       // \p{S}
  kSeparator = 6,    // \p{Z}
};

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;
inline constexpr uint32_t kReplacementCharacter = 0xFFFD;

// Category of `cp`; codepoints above U+10FFFF are kOther.
UnicodeCategory CategoryOf(uint32_t cp);
// The White_Space property (what \s matches): TAB..CR, space, U+0085, U+00A0,
// U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000.
bool IsWhitespace(uint32_t cp);
// Unicode version of the generated table.
const char* UnicodeTableVersion();

// Length of the UTF-8 sequence announced by `lead` from its high nibble
// (1 for ASCII and stray continuation bytes, 2, 3 or 4), as llama.cpp does.
size_t Utf8SequenceLength(uint8_t lead);

// Decodes `text` into codepoints. A byte that does not start a structurally
// valid sequence becomes U+FFFD and decoding resumes at the next byte
// (llama.cpp's convention: overlong forms and surrogates are not rejected).
std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text);

// Appends the UTF-8 encoding of `cp`; values above U+10FFFF append U+FFFD.
void AppendUtf8(uint32_t cp, std::string* out);

// Length of the longest prefix of `bytes` that is valid UTF-8 (RFC 3629:
// no overlongs, no surrogates, nothing above U+10FFFF).
size_t ValidUtf8PrefixLength(std::string_view bytes);

// The GPT-2 byte-level alphabet: each byte maps to one printable codepoint
// ('!'..'~', U+00A1..U+00AC and U+00AE..U+00FF map to themselves, the other
// 68 bytes to U+0100.. in byte order).
uint32_t ByteToAlphabet(uint8_t byte);
// Inverse of ByteToAlphabet; -1 for a codepoint outside the alphabet.
int AlphabetToByte(uint32_t cp);

namespace unicode_internal {
struct CodepointRange {
  uint32_t start;
  uint8_t flags;  // UnicodeCategory in bits 0..2, whitespace in bit 3
};
extern const CodepointRange kCodepointRanges[];
extern const int kNumCodepointRanges;
extern const char kUnicodeVersion[];
inline constexpr uint8_t kWhitespaceBit = 0x08;
// Flags of every codepoint 0..U+10FFFF, built once on first use.
const uint8_t* FlagTable();
}  // namespace unicode_internal

// Hot-path variant of CategoryOf/IsWhitespace: the raw flags byte.
inline uint8_t CodepointFlags(uint32_t cp) { return cp <= kMaxCodepoint ? unicode_internal::FlagTable()[cp] : 0; }

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MODEL_UNICODE_H_
