// Tensor element types as numbered in the GGUF format, and their block layout.
#ifndef CAIRN_BACKENDS_MODEL_GGML_TYPE_H_
#define CAIRN_BACKENDS_MODEL_GGML_TYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cairn {

// Values are the on-disk ids of the GGUF format; only the types cairn can
// dequantize are named. Any other id is rejected when a file is opened.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

struct GgmlTypeTraits {
  std::string_view name;
  int64_t block_size;  // elements per block (1 for plain floats)
  size_t block_bytes;  // bytes per block
};

// Returns the traits of a supported type id, or nullopt for unknown ids.
std::optional<GgmlTypeTraits> TraitsOf(uint32_t type_id);
// Traits of a known type (never fails).
const GgmlTypeTraits& Traits(GgmlType type);
inline std::string_view TypeName(GgmlType type) { return Traits(type).name; }

// Bytes of a row of `n` elements; n must be a multiple of the block size.
inline size_t RowBytes(GgmlType type, int64_t n) {
  const GgmlTypeTraits& t = Traits(type);
  return static_cast<size_t>(n / t.block_size) * t.block_bytes;
}

}  // namespace cairn

#endif  // CAIRN_BACKENDS_MODEL_GGML_TYPE_H_
