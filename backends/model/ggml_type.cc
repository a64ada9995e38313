#include "backends/model/ggml_type.h"

#include <array>
#include <utility>

namespace cairn {
namespace {

// Block sizes and byte counts of the GGUF format (QK_K = 256 super-blocks).
constexpr std::array<std::pair<GgmlType, GgmlTypeTraits>, 11> kTypes = {{
    {GgmlType::kF32, {"F32", 1, 4}},
    {GgmlType::kF16, {"F16", 1, 2}},
    {GgmlType::kBF16, {"BF16", 1, 2}},
    {GgmlType::kQ4_0, {"Q4_0", 32, 2 + 16}},
    {GgmlType::kQ4_1, {"Q4_1", 32, 2 + 2 + 16}},
    {GgmlType::kQ5_0, {"Q5_0", 32, 2 + 4 + 16}},
    {GgmlType::kQ5_1, {"Q5_1", 32, 2 + 2 + 4 + 16}},
    {GgmlType::kQ8_0, {"Q8_0", 32, 2 + 32}},
    {GgmlType::kQ4_K, {"Q4_K", 256, 2 + 2 + 12 + 128}},
    {GgmlType::kQ5_K, {"Q5_K", 256, 2 + 2 + 12 + 32 + 128}},
    {GgmlType::kQ6_K, {"Q6_K", 256, 128 + 64 + 16 + 2}},
}};

const GgmlTypeTraits* Find(uint32_t type_id) {
  for (const auto& [type, traits] : kTypes) {
    if (static_cast<uint32_t>(type) == type_id) return &traits;
  }
  return nullptr;
}

}  // namespace

std::optional<GgmlTypeTraits> TraitsOf(uint32_t type_id) {
  const GgmlTypeTraits* t = Find(type_id);
  return t ? std::optional<GgmlTypeTraits>(*t) : std::nullopt;
}

const GgmlTypeTraits& Traits(GgmlType type) {
  // Every enumerator is in the table, so this never falls through.
  const GgmlTypeTraits* t = Find(static_cast<uint32_t>(type));
  return t ? *t : kTypes[0].second;
}

}  // namespace cairn
