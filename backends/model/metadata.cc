#include "backends/model/metadata.h"

#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cairn {

std::string_view ValueTypeName(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

bool IsIntegerType(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
      return true;
    default:
      return false;
  }
}

bool IsFloatType(GgufValueType t) { return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64; }

MetadataValue MetadataValue::FromScalar(GgufValueType type, Scalar value) {
  MetadataValue v;
  v.type_ = type;
  v.elem_type_ = type;
  v.scalar_ = std::move(value);
  return v;
}

MetadataValue MetadataValue::FromNumberArray(GgufValueType elem_type, std::vector<Scalar> values) {
  MetadataValue v;
  v.type_ = GgufValueType::kArray;
  v.elem_type_ = elem_type;
  v.numbers_ = std::move(values);
  return v;
}

MetadataValue MetadataValue::FromStringArray(std::vector<std::string> values) {
  MetadataValue v;
  v.type_ = GgufValueType::kArray;
  v.elem_type_ = GgufValueType::kString;
  v.strings_ = std::move(values);
  return v;
}

size_t MetadataValue::array_size() const {
  if (!is_array()) return 0;
  return elem_type_ == GgufValueType::kString ? strings_.size() : numbers_.size();
}

std::string MetadataValue::TypeDescription() const {
  if (is_array()) return absl::StrCat("array[", std::string(ValueTypeName(elem_type_)), "]");
  return std::string(ValueTypeName(type_));
}

namespace {

std::string ScalarToString(const MetadataValue::Scalar& s) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return absl::StrCat("\"", x, "\"");
        } else if constexpr (std::is_same_v<T, bool>) {
          return x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, double>) {
          return absl::StrFormat("%g", x);
        } else {
          return absl::StrCat(x);
        }
      },
      s);
}

}  // namespace

std::string MetadataValue::ToString(size_t max_items) const {
  if (!is_array()) return ScalarToString(scalar_);
  std::string out = "[";
  const size_t n = array_size();
  for (size_t i = 0; i < n && i < max_items; ++i) {
    if (i) out += ", ";
    out += elem_type_ == GgufValueType::kString ? absl::StrCat("\"", strings_[i], "\"") : ScalarToString(numbers_[i]);
  }
  if (n > max_items) absl::StrAppend(&out, ", ... (", n, " items)");
  out += "]";
  return out;
}

void Metadata::Set(std::string key, MetadataValue value) {
  entries_.insert_or_assign(std::move(key), std::move(value));
}

bool Metadata::Has(std::string_view key) const { return entries_.find(key) != entries_.end(); }

const MetadataValue* Metadata::Find(std::string_view key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

absl::StatusOr<const MetadataValue*> Metadata::Lookup(std::string_view key) const {
  const MetadataValue* v = Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat("metadata key '", std::string(key), "' not found"));
  return v;
}

namespace {

absl::Status TypeError(std::string_view key, const MetadataValue& v, std::string_view expected) {
  return absl::InvalidArgumentError(absl::StrCat("metadata key '", std::string(key), "' has type ", v.TypeDescription(),
                                                 ", expected ", std::string(expected)));
}

// Integer value of an integer scalar as int64, if representable.
absl::StatusOr<int64_t> AsInt(std::string_view key, const MetadataValue::Scalar& s) {
  if (const int64_t* i = std::get_if<int64_t>(&s)) return *i;
  if (const uint64_t* u = std::get_if<uint64_t>(&s)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::OutOfRangeError(
          absl::StrCat("metadata key '", std::string(key), "' value ", *u, " does not fit in int64"));
    }
    return static_cast<int64_t>(*u);
  }
  return absl::InternalError("not an integer scalar");
}

double AsDouble(const MetadataValue::Scalar& s) {
  if (const double* d = std::get_if<double>(&s)) return *d;
  if (const int64_t* i = std::get_if<int64_t>(&s)) return static_cast<double>(*i);
  if (const uint64_t* u = std::get_if<uint64_t>(&s)) return static_cast<double>(*u);
  return 0.0;
}

}  // namespace

absl::StatusOr<int64_t> Metadata::GetInt(std::string_view key) const {
  absl::StatusOr<const MetadataValue*> v = Lookup(key);
  if (!v.ok()) return v.status();
  if ((*v)->is_array() || !IsIntegerType((*v)->type())) return TypeError(key, **v, "an integer");
  return AsInt(key, (*v)->scalar());
}

absl::StatusOr<uint64_t> Metadata::GetUint(std::string_view key) const {
  absl::StatusOr<const MetadataValue*> v = Lookup(key);
  if (!v.ok()) return v.status();
  if ((*v)->is_array() || !IsIntegerType((*v)->type())) return TypeError(key, **v, "an integer");
  const MetadataValue::Scalar& s = (*v)->scalar();
  if (const uint64_t* u = std::get_if<uint64_t>(&s)) return *u;
  int64_t i = std::get<int64_t>(s);
  if (i < 0) {
    return absl::OutOfRangeError(
        absl::StrCat("metadata key '", std::string(key), "' is negative (", i, "), expected a non-negative integer"));
  }
  return static_cast<uint64_t>(i);
}

absl::StatusOr<double> Metadata::GetFloat(std::string_view key) const {
  absl::StatusOr<const MetadataValue*> v = Lookup(key);
  if (!v.ok()) return v.status();
  const GgufValueType t = (*v)->type();
  if ((*v)->is_array() || !(IsFloatType(t) || IsIntegerType(t))) return TypeError(key, **v, "a number");
  return AsDouble((*v)->scalar());
}

absl::StatusOr<bool> Metadata::GetBool(std::string_view key) const {
  absl::StatusOr<const MetadataValue*> v = Lookup(key);
  if (!v.ok()) return v.status();
  if ((*v)->type() != GgufValueType::kBool) return TypeError(key, **v, "bool");
  return std::get<bool>((*v)->scalar());
}

absl::StatusOr<std::string> Metadata::GetString(std::string_view key) const {
  absl::StatusOr<const MetadataValue*> v = Lookup(key);
  if (!v.ok()) return v.status();
  if ((*v)->type() != GgufValueType::kString) return TypeError(key, **v, "string");
  return std::get<std::string>((*v)->scalar());
}

absl::StatusOr<std::vector<int64_t>> Metadata::GetIntArray(std::string_view key) const {
  absl::StatusOr<const MetadataValue*> v = Lookup(key);
  if (!v.ok()) return v.status();
  if (!(*v)->is_array() || !IsIntegerType((*v)->element_type())) {
    return TypeError(key, **v, "an array of integers");
  }
  std::vector<int64_t> out;
  out.reserve((*v)->numbers().size());
  for (const MetadataValue::Scalar& s : (*v)->numbers()) {
    absl::StatusOr<int64_t> i = AsInt(key, s);
    if (!i.ok()) return i.status();
    out.push_back(*i);
  }
  return out;
}

absl::StatusOr<std::vector<double>> Metadata::GetFloatArray(std::string_view key) const {
  absl::StatusOr<const MetadataValue*> v = Lookup(key);
  if (!v.ok()) return v.status();
  const GgufValueType e = (*v)->element_type();
  if (!(*v)->is_array() || !(IsFloatType(e) || IsIntegerType(e))) {
    return TypeError(key, **v, "an array of numbers");
  }
  std::vector<double> out;
  out.reserve((*v)->numbers().size());
  for (const MetadataValue::Scalar& s : (*v)->numbers()) out.push_back(AsDouble(s));
  return out;
}

absl::StatusOr<const std::vector<std::string>*> Metadata::GetStringArrayRef(std::string_view key) const {
  absl::StatusOr<const MetadataValue*> v = Lookup(key);
  if (!v.ok()) return v.status();
  if (!(*v)->is_array() || (*v)->element_type() != GgufValueType::kString) {
    return TypeError(key, **v, "array[string]");
  }
  return &(*v)->strings();
}

absl::StatusOr<std::vector<std::string>> Metadata::GetStringArray(std::string_view key) const {
  absl::StatusOr<const std::vector<std::string>*> ref = GetStringArrayRef(key);
  if (!ref.ok()) return ref.status();
  return **ref;
}

absl::StatusOr<int64_t> Metadata::GetIntOr(std::string_view key, int64_t fallback) const {
  return Has(key) ? GetInt(key) : absl::StatusOr<int64_t>(fallback);
}
absl::StatusOr<double> Metadata::GetFloatOr(std::string_view key, double fallback) const {
  return Has(key) ? GetFloat(key) : absl::StatusOr<double>(fallback);
}
absl::StatusOr<bool> Metadata::GetBoolOr(std::string_view key, bool fallback) const {
  return Has(key) ? GetBool(key) : absl::StatusOr<bool>(fallback);
}
absl::StatusOr<std::string> Metadata::GetStringOr(std::string_view key, std::string fallback) const {
  return Has(key) ? GetString(key) : absl::StatusOr<std::string>(std::move(fallback));
}

}  // namespace cairn
