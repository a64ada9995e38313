// String building over std::string_view. Debian's abseil has a string_view
// type of its own, which absl::StrCat does not take from std::string_view;
// Cat takes std::string_view, strings, numbers and absl::Hex.
#ifndef CAIRN_CHAT_JINJA_STRINGS_H_
#define CAIRN_CHAT_JINJA_STRINGS_H_

#include <string>
#include <string_view>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace cairn::jinja {

namespace strings_internal {
inline void Append(std::string* out, std::string_view s) { out->append(s.data(), s.size()); }
inline void Append(std::string* out, absl::string_view s) { out->append(s.data(), s.size()); }
inline void Append(std::string* out, const std::string& s) { out->append(s); }
inline void Append(std::string* out, const char* s) { out->append(s); }
inline void Append(std::string* out, char c) { out->push_back(c); }
inline void Append(std::string* out, const absl::Hex& h) { absl::StrAppend(out, h); }
template <typename T,
          std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, char> && !std::is_same_v<T, bool>, int> = 0>
void Append(std::string* out, T v) {
  absl::StrAppend(out, v);
}
}  // namespace strings_internal

template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (strings_internal::Append(&out, args), ...);
  return out;
}

template <typename... Args>
void CatAppend(std::string* out, const Args&... args) {
  (strings_internal::Append(out, args), ...);
}

}  // namespace cairn::jinja

#endif  // CAIRN_CHAT_JINJA_STRINGS_H_
