#include "backends/model/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace cairn {
namespace {

template <typename T>
void Put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void PutString(std::vector<uint8_t>& out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

// Encodes one scalar in the on-disk width of `type`.
void PutScalar(std::vector<uint8_t>& out, GgufValueType type, const MetadataValue::Scalar& s) {
  auto as_i = [&]() -> int64_t {
    if (auto* i = std::get_if<int64_t>(&s)) return *i;
    if (auto* u = std::get_if<uint64_t>(&s)) return static_cast<int64_t>(*u);
    if (auto* d = std::get_if<double>(&s)) return static_cast<int64_t>(*d);
    if (auto* b = std::get_if<bool>(&s)) return *b ? 1 : 0;
    return 0;
  };
  auto as_d = [&]() -> double {
    if (auto* d = std::get_if<double>(&s)) return *d;
    return static_cast<double>(as_i());
  };
  switch (type) {
    case GgufValueType::kUint8:
      Put<uint8_t>(out, static_cast<uint8_t>(as_i()));
      break;
    case GgufValueType::kInt8:
      Put<int8_t>(out, static_cast<int8_t>(as_i()));
      break;
    case GgufValueType::kUint16:
      Put<uint16_t>(out, static_cast<uint16_t>(as_i()));
      break;
    case GgufValueType::kInt16:
      Put<int16_t>(out, static_cast<int16_t>(as_i()));
      break;
    case GgufValueType::kUint32:
      Put<uint32_t>(out, static_cast<uint32_t>(as_i()));
      break;
    case GgufValueType::kInt32:
      Put<int32_t>(out, static_cast<int32_t>(as_i()));
      break;
    case GgufValueType::kUint64:
      Put<uint64_t>(out, std::holds_alternative<uint64_t>(s) ? std::get<uint64_t>(s) : static_cast<uint64_t>(as_i()));
      break;
    case GgufValueType::kInt64:
      Put<int64_t>(out, as_i());
      break;
    case GgufValueType::kFloat32:
      Put<float>(out, static_cast<float>(as_d()));
      break;
    case GgufValueType::kFloat64:
      Put<double>(out, as_d());
      break;
    case GgufValueType::kBool:
      Put<uint8_t>(out, as_i() != 0);
      break;
    case GgufValueType::kString:
      PutString(out, std::holds_alternative<std::string>(s) ? std::get<std::string>(s) : "");
      break;
    case GgufValueType::kArray:
      break;
  }
}

}  // namespace

void GgufWriter::Set(std::string key, MetadataValue value) {
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(std::move(key), std::move(value));
}

bool GgufWriter::Erase(const std::string& key) {
  for (auto it = kv_.begin(); it != kv_.end(); ++it) {
    if (it->first == key) {
      kv_.erase(it);
      return true;
    }
  }
  return false;
}

void GgufWriter::SetUint32(std::string key, uint32_t v) {
  Set(std::move(key), MetadataValue::FromScalar(GgufValueType::kUint32, uint64_t{v}));
}
void GgufWriter::SetInt32(std::string key, int32_t v) {
  Set(std::move(key), MetadataValue::FromScalar(GgufValueType::kInt32, int64_t{v}));
}
void GgufWriter::SetUint64(std::string key, uint64_t v) {
  Set(std::move(key), MetadataValue::FromScalar(GgufValueType::kUint64, v));
}
void GgufWriter::SetFloat32(std::string key, float v) {
  Set(std::move(key), MetadataValue::FromScalar(GgufValueType::kFloat32, double{v}));
}
void GgufWriter::SetBool(std::string key, bool v) {
  Set(std::move(key), MetadataValue::FromScalar(GgufValueType::kBool, v));
}
void GgufWriter::SetString(std::string key, std::string v) {
  Set(std::move(key), MetadataValue::FromScalar(GgufValueType::kString, std::move(v)));
}
void GgufWriter::SetStringArray(std::string key, std::vector<std::string> v) {
  Set(std::move(key), MetadataValue::FromStringArray(std::move(v)));
}
void GgufWriter::SetInt32Array(std::string key, const std::vector<int32_t>& v) {
  std::vector<MetadataValue::Scalar> s(v.begin(), v.end());
  for (size_t i = 0; i < v.size(); ++i) s[i] = int64_t{v[i]};
  Set(std::move(key), MetadataValue::FromNumberArray(GgufValueType::kInt32, std::move(s)));
}
void GgufWriter::SetFloat32Array(std::string key, const std::vector<float>& v) {
  std::vector<MetadataValue::Scalar> s(v.size());
  for (size_t i = 0; i < v.size(); ++i) s[i] = double{v[i]};
  Set(std::move(key), MetadataValue::FromNumberArray(GgufValueType::kFloat32, std::move(s)));
}

void GgufWriter::AddTensor(std::string name, GgmlType type, std::vector<int64_t> shape, std::vector<uint8_t> data) {
  tensors_.push_back(Tensor{std::move(name), type, std::move(shape), std::move(data)});
}

void GgufWriter::AddF32Tensor(std::string name, std::vector<int64_t> shape, const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  AddTensor(std::move(name), GgmlType::kF32, std::move(shape), std::move(bytes));
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint8_t> out;
  Put<uint32_t>(out, 0x46554747);
  Put<uint32_t>(out, version_);
  Put<uint64_t>(out, tensors_.size());
  Put<uint64_t>(out, kv_.size());
  for (const auto& [key, value] : kv_) {
    PutString(out, key);
    Put<uint32_t>(out, static_cast<uint32_t>(value.type()));
    if (!value.is_array()) {
      PutScalar(out, value.type(), value.scalar());
      continue;
    }
    Put<uint32_t>(out, static_cast<uint32_t>(value.element_type()));
    Put<uint64_t>(out, value.array_size());
    if (value.element_type() == GgufValueType::kString) {
      for (const std::string& s : value.strings()) PutString(out, s);
    } else {
      for (const MetadataValue::Scalar& s : value.numbers()) PutScalar(out, value.element_type(), s);
    }
  }
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const Tensor& t : tensors_) {
    PutString(out, t.name);
    Put<uint32_t>(out, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) Put<int64_t>(out, d);
    Put<uint32_t>(out, static_cast<uint32_t>(t.type));
    Put<uint64_t>(out, offset);
    offsets.push_back(offset);
    offset += (t.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  const size_t data_start = out.size();
  out.resize(data_start + offset, 0);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensors_[i].data.empty()) {
      std::memcpy(out.data() + data_start + offsets[i], tensors_[i].data.data(), tensors_[i].data.size());
    }
  }
  return out;
}

absl::Status GgufWriter::WriteFile(const std::string& path) const {
  const std::vector<uint8_t> bytes = Serialize();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::PermissionDeniedError(absl::StrCat("cannot write '", path, "'"));
  const size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool closed = std::fclose(f) == 0;
  if (written != bytes.size() || !closed) {
    return absl::DataLossError(absl::StrCat("short write to '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace cairn
