#include "synthetic/synthetic_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/model/dequant.h"

namespace cairn::synthetic {
namespace {

// The values of `t` as its Init draws them (rng advanced past them).
absl::StatusOr<std::vector<float>> Draw(const SyntheticTensor& t, Rng& rng) {
  const int64_t n = t.n_elements();
  const Init& init = t.init;
  switch (init.kind) {
    case Init::Kind::kConstant:
      return std::vector<float>(static_cast<size_t>(n), init.a);
    case Init::Kind::kUniform:
      return rng.Vec(n, init.a, init.b);
    case Init::Kind::kRowUniform: {
      const int64_t row = t.shape.empty() ? 1 : t.shape[0];
      if (static_cast<int64_t>(init.row_half_width.size()) * row != n) {
        return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "': ", init.row_half_width.size(),
                                                       " row widths for ", n / std::max<int64_t>(row, 1), " rows"));
      }
      std::vector<float> v(static_cast<size_t>(n), 0.0f);
      for (size_t r = 0; r < init.row_half_width.size(); ++r) {
        const float h = init.row_half_width[r];
        if (h == 0.0f) continue;
        for (int64_t i = 0; i < row; ++i) v[r * row + i] = rng.Uniform(-h, h);
      }
      return v;
    }
    case Init::Kind::kValues:
      if (static_cast<int64_t>(init.values.size()) != n) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", t.name, "': ", init.values.size(), " values for ", n, " elements"));
      }
      return init.values;
  }
  return absl::InternalError("unknown Init kind");
}

std::vector<uint8_t> AsBytes(const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(float));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <uint16_t (*Convert)(float)>
std::vector<uint8_t> AsHalves(const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = Convert(values[i]);
    std::memcpy(&out[2 * i], &h, 2);
  }
  return out;
}

// The type `t` is stored in: the model's weight type for a weight whose
// rows fit its blocks, F32 otherwise.
GgmlType StorageType(const SyntheticTensor& t, GgmlType weight_type) {
  if (!t.weight || t.shape.empty()) return GgmlType::kF32;
  return t.shape[0] % Traits(weight_type).block_size == 0 ? weight_type : GgmlType::kF32;
}

// `t`'s bytes in `type`, drawing from rng what its Init draws.
absl::StatusOr<std::vector<uint8_t>> Encode(const SyntheticTensor& t, GgmlType type, Rng& rng) {
  const bool by_value =
      type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16 || type == GgmlType::kQ8_0;
  if (!by_value) {
    if (t.init.kind == Init::Kind::kValues) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "': given values cannot be stored as ",
                                                     std::string(TypeName(type)), " (random blocks only)"));
    }
    return RandomBlocks(type, t.n_elements(), t.init.magnitude(), rng);
  }
  absl::StatusOr<std::vector<float>> values = Draw(t, rng);
  if (!values.ok()) return values.status();
  switch (type) {
    case GgmlType::kF16:
      return AsHalves<&Fp32ToFp16>(*values);
    case GgmlType::kBF16:
      return AsHalves<&Fp32ToBf16>(*values);
    case GgmlType::kQ8_0:
      return QuantizeQ8_0(*values);
    default:
      return AsBytes(*values);
  }
}

}  // namespace

std::vector<uint8_t> RandomBlocks(GgmlType type, int64_t n, float magnitude, Rng& rng) {
  const GgmlTypeTraits& traits = Traits(type);
  const size_t bytes = RowBytes(type, n);
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = rng.Next();
    std::memcpy(&data[i], &v, 8);
  }
  const uint16_t d = Fp32ToFp16(magnitude / 64.0f);
  const uint16_t dmin = Fp32ToFp16(magnitude / 256.0f);
  for (size_t off = 0; off < bytes; off += traits.block_bytes) {
    uint8_t* block = &data[off];
    switch (type) {
      case GgmlType::kQ6_K:
        std::memcpy(block + 208, &d, 2);
        break;
      case GgmlType::kQ4_K:
      case GgmlType::kQ5_K:
      case GgmlType::kQ4_1:
      case GgmlType::kQ5_1:
        std::memcpy(block, &d, 2);
        std::memcpy(block + 2, &dmin, 2);
        break;
      default:  // Q4_0, Q5_0: the scale first
        std::memcpy(block, &d, 2);
        break;
    }
  }
  return data;
}

Init Init::FanIn(int64_t n_in) { return Symmetric(1.0f / std::sqrt(static_cast<float>(n_in))); }

float Init::magnitude() const {
  switch (kind) {
    case Kind::kConstant:
    case Kind::kUniform:
      return std::max(std::abs(a), std::abs(b));
    case Kind::kRowUniform:
      return row_half_width.empty() ? 0.0f : *std::max_element(row_half_width.begin(), row_half_width.end());
    case Kind::kValues: {
      float m = 0.0f;
      for (float v : values) m = std::max(m, std::abs(v));
      return m;
    }
  }
  return 0.0f;
}

int64_t SyntheticTensor::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SyntheticModel::SyntheticModel(std::string arch) : arch_(std::move(arch)) {
  metadata_.SetString("general.architecture", arch_);
}

void SyntheticModel::Add(std::string name, std::vector<int64_t> shape, Init init) {
  SyntheticTensor t{std::move(name), std::move(shape), std::move(init), false};
  if (SyntheticTensor* old = Find(t.name)) {
    *old = std::move(t);
    return;
  }
  tensors_.push_back(std::move(t));
}

void SyntheticModel::AddWeight(std::string name, std::vector<int64_t> shape) {
  const int64_t n_in = shape.empty() ? 1 : shape[0];
  AddWeight(std::move(name), std::move(shape), Init::FanIn(n_in));
}

void SyntheticModel::AddWeight(std::string name, std::vector<int64_t> shape, Init init) {
  const std::string key = name;
  Add(std::move(name), std::move(shape), std::move(init));
  Find(key)->weight = true;
}

SyntheticTensor* SyntheticModel::Find(const std::string& name) {
  for (SyntheticTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

bool SyntheticModel::Remove(const std::string& name) {
  const auto it =
      std::find_if(tensors_.begin(), tensors_.end(), [&](const SyntheticTensor& t) { return t.name == name; });
  if (it == tensors_.end()) return false;
  tensors_.erase(it);
  return true;
}

void SyntheticModel::Materialize() {
  Rng rng(seed);
  for (SyntheticTensor& t : tensors_) {
    absl::StatusOr<std::vector<float>> values = Draw(t, rng);
    // A draw fails only for inconsistent values, which Serialize reports.
    if (values.ok()) t.init = Init::Values(*std::move(values));
  }
}

std::vector<float>& SyntheticModel::Values(const std::string& name) {
  Materialize();
  return Find(name)->init.values;
}

absl::StatusOr<std::vector<uint8_t>> SyntheticModel::Serialize() const {
  GgufWriter w = metadata_;
  Rng rng(seed);
  for (const SyntheticTensor& t : tensors_) {
    const GgmlType type = StorageType(t, weight_type);
    absl::StatusOr<std::vector<uint8_t>> bytes = Encode(t, type, rng);
    if (!bytes.ok()) return bytes.status();
    w.AddTensor(t.name, type, t.shape, *std::move(bytes));
  }
  return w.Serialize();
}

absl::StatusOr<std::shared_ptr<const ModelFile>> SyntheticModel::Open(const std::string& name) const {
  absl::StatusOr<std::vector<uint8_t>> bytes = Serialize();
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::unique_ptr<ModelFile>> file = ModelFile::FromBuffer(*bytes, name);
  if (!file.ok()) return file.status();
  return std::shared_ptr<const ModelFile>(std::move(*file));
}

std::vector<uint8_t> QuantizeQ8_0(std::span<const float> x) {
  std::vector<uint8_t> out;
  out.reserve(x.size() / 32 * 34);
  for (size_t b = 0; b + 32 <= x.size(); b += 32) {
    float amax = 0.0f;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::abs(x[b + i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t h = Fp32ToFp16(d);
    out.push_back(static_cast<uint8_t>(h & 0xff));
    out.push_back(static_cast<uint8_t>(h >> 8));
    for (size_t i = 0; i < 32; ++i)
      out.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::lround(x[b + i] * id))));
  }
  return out;
}

}  // namespace cairn::synthetic
