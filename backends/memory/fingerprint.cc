#include "backends/memory/fingerprint.h"

#include <algorithm>
#include <string>
#include <variant>

#include "backends/model/metadata.h"

namespace cairn {

uint64_t FingerprintMix(uint64_t h, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

namespace {

uint64_t MixScalar(uint64_t h, const MetadataValue::Scalar& v) {
  h = FingerprintMix(h, static_cast<int64_t>(v.index()));
  if (const std::string* s = std::get_if<std::string>(&v)) {
    h = FingerprintMix(h, static_cast<int64_t>(s->size()));
    return FingerprintMix(h, *s);
  }
  return std::visit([h](const auto& x) { return FingerprintMix(h, &x, sizeof x); }, v);
}

}  // namespace

uint64_t ModelFingerprint(const ModelFile& model) {
  uint64_t h = 0xcbf29ce484222325ULL;
  // Hyperparameters change what a state means as much as weights do. The
  // tokenizer's keys (large vocabularies) do not, and are left out.
  for (const auto& [key, value] : model.metadata().entries()) {
    if (key.rfind("tokenizer.", 0) == 0) continue;
    h = FingerprintMix(h, static_cast<int64_t>(key.size()));
    h = FingerprintMix(h, key);
    h = MixScalar(h, value.scalar());
    for (const MetadataValue::Scalar& x : value.numbers()) h = MixScalar(h, x);
    for (const std::string& x : value.strings()) h = MixScalar(h, x);
  }
  for (const TensorInfo* t : model.tensors()) {
    h = FingerprintMix(h, static_cast<int64_t>(t->name.size()));
    h = FingerprintMix(h, t->name);
    h = FingerprintMix(h, static_cast<int64_t>(t->type));
    for (int64_t d : t->shape) h = FingerprintMix(h, d);
    const size_t n = static_cast<size_t>(t->n_bytes);
    const size_t k = std::min<size_t>(64, n);
    if (t->data != nullptr && k > 0) {
      h = FingerprintMix(h, t->data, k);
      h = FingerprintMix(h, t->data + (n - k) / 2, k);
      h = FingerprintMix(h, t->data + (n - k), k);
    }
  }
  return h;
}

uint64_t MemoryLayout(const ModelFile& model, std::string_view encoding, std::initializer_list<int64_t> geometry) {
  uint64_t h = FingerprintMix(ModelFingerprint(model), static_cast<int64_t>(encoding.size()));
  h = FingerprintMix(h, encoding);
  for (int64_t v : geometry) h = FingerprintMix(h, v);
  return h;
}

}  // namespace cairn
