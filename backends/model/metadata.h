// GGUF metadata: a typed key/value table with accessors whose errors name the
// key and the type actually found.
#ifndef CAIRN_BACKENDS_MODEL_METADATA_H_
#define CAIRN_BACKENDS_MODEL_METADATA_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

namespace cairn {

// On-disk ids of GGUF metadata value types.
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};
std::string_view ValueTypeName(GgufValueType type);
bool IsIntegerType(GgufValueType type);
bool IsFloatType(GgufValueType type);

// One metadata value. Scalars keep their on-disk type; integers are widened
// to int64/uint64 storage, floats to double (exact for float32). Arrays keep
// their element type and hold either numbers or strings.
class MetadataValue {
 public:
  using Scalar = std::variant<int64_t, uint64_t, double, bool, std::string>;

  static MetadataValue FromScalar(GgufValueType type, Scalar value);
  static MetadataValue FromNumberArray(GgufValueType elem_type, std::vector<Scalar> values);
  static MetadataValue FromStringArray(std::vector<std::string> values);

  GgufValueType type() const { return type_; }
  // For arrays: element type; otherwise same as type().
  GgufValueType element_type() const { return elem_type_; }
  bool is_array() const { return type_ == GgufValueType::kArray; }
  size_t array_size() const;

  // "uint32", "string", "array[string]", ...
  std::string TypeDescription() const;
  // Short human-readable rendering (arrays abbreviated).
  std::string ToString(size_t max_array_items = 8) const;

  const Scalar& scalar() const { return scalar_; }
  const std::vector<Scalar>& numbers() const { return numbers_; }
  const std::vector<std::string>& strings() const { return strings_; }

 private:
  GgufValueType type_ = GgufValueType::kUint8;
  GgufValueType elem_type_ = GgufValueType::kUint8;
  Scalar scalar_;
  std::vector<Scalar> numbers_;
  std::vector<std::string> strings_;
};

// Ordered key -> value table. Accessors fail with NOT_FOUND when the key is
// missing and INVALID_ARGUMENT "key 'k' has type T, expected U" on a type
// mismatch. Integer accessors accept any integer type whose value fits;
// float accessors accept float32/float64 (and integers, widened).
class Metadata {
 public:
  void Set(std::string key, MetadataValue value);
  bool Has(std::string_view key) const;
  const MetadataValue* Find(std::string_view key) const;
  const std::map<std::string, MetadataValue, std::less<>>& entries() const { return entries_; }

  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<uint64_t> GetUint(std::string_view key) const;
  absl::StatusOr<double> GetFloat(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  absl::StatusOr<std::vector<double>> GetFloatArray(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  // Zero-copy view of a string array (e.g. a 150k-entry vocabulary).
  absl::StatusOr<const std::vector<std::string>*> GetStringArrayRef(std::string_view key) const;

  // Defaults only for a missing key; a present key of the wrong type is still an error.
  absl::StatusOr<int64_t> GetIntOr(std::string_view key, int64_t fallback) const;
  absl::StatusOr<double> GetFloatOr(std::string_view key, double fallback) const;
  absl::StatusOr<bool> GetBoolOr(std::string_view key, bool fallback) const;
  absl::StatusOr<std::string> GetStringOr(std::string_view key, std::string fallback) const;

 private:
  absl::StatusOr<const MetadataValue*> Lookup(std::string_view key) const;
  std::map<std::string, MetadataValue, std::less<>> entries_;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MODEL_METADATA_H_
