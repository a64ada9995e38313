#include "backends/model/ggml_type.h"

namespace cairn {
namespace {

// Block sizes and byte counts of the GGUF format (QK_K = 256 super-blocks).
constexpr GgmlTypeTraits kF32{"F32", 1, 4};
constexpr GgmlTypeTraits kF16{"F16", 1, 2};
constexpr GgmlTypeTraits kBF16{"BF16", 1, 2};
constexpr GgmlTypeTraits kQ4_0{"Q4_0", 32, 2 + 16};
constexpr GgmlTypeTraits kQ4_1{"Q4_1", 32, 2 + 2 + 16};
constexpr GgmlTypeTraits kQ5_0{"Q5_0", 32, 2 + 4 + 16};
constexpr GgmlTypeTraits kQ5_1{"Q5_1", 32, 2 + 2 + 4 + 16};
constexpr GgmlTypeTraits kQ8_0{"Q8_0", 32, 2 + 32};
constexpr GgmlTypeTraits kQ4_K{"Q4_K", 256, 2 + 2 + 12 + 128};
constexpr GgmlTypeTraits kQ5_K{"Q5_K", 256, 2 + 2 + 12 + 32 + 128};
constexpr GgmlTypeTraits kQ6_K{"Q6_K", 256, 128 + 64 + 16 + 2};

}  // namespace

std::optional<GgmlTypeTraits> TraitsOf(uint32_t type_id) {
  switch (static_cast<GgmlType>(type_id)) {
    case GgmlType::kF32: return kF32;
    case GgmlType::kF16: return kF16;
    case GgmlType::kBF16: return kBF16;
    case GgmlType::kQ4_0: return kQ4_0;
    case GgmlType::kQ4_1: return kQ4_1;
    case GgmlType::kQ5_0: return kQ5_0;
    case GgmlType::kQ5_1: return kQ5_1;
    case GgmlType::kQ8_0: return kQ8_0;
    case GgmlType::kQ4_K: return kQ4_K;
    case GgmlType::kQ5_K: return kQ5_K;
    case GgmlType::kQ6_K: return kQ6_K;
  }
  return std::nullopt;
}

const GgmlTypeTraits& Traits(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return kF32;
    case GgmlType::kF16: return kF16;
    case GgmlType::kBF16: return kBF16;
    case GgmlType::kQ4_0: return kQ4_0;
    case GgmlType::kQ4_1: return kQ4_1;
    case GgmlType::kQ5_0: return kQ5_0;
    case GgmlType::kQ5_1: return kQ5_1;
    case GgmlType::kQ8_0: return kQ8_0;
    case GgmlType::kQ4_K: return kQ4_K;
    case GgmlType::kQ5_K: return kQ5_K;
    case GgmlType::kQ6_K: return kQ6_K;
  }
  return kF32;  // unreachable for valid enum values
}

}  // namespace cairn
