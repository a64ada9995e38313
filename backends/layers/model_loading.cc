#include "backends/layers/model_loading.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/model/dequant.h"

namespace cairn {
namespace {

// Shapes compare without trailing 1s: GGUF writers differ in whether they
// keep them ([8] vs [1, 8] is not the same, [8, 1] vs [8] is).
std::vector<int64_t> TrimmedShape(std::vector<int64_t> shape) {
  while (shape.size() > 1 && shape.back() == 1) shape.pop_back();
  return shape;
}

}  // namespace

std::string BlockTensor(int64_t layer, absl::string_view name) { return absl::StrCat("blk.", layer, ".", name); }

absl::StatusOr<ModelLoader> ModelLoader::For(const ModelFile& model, PackedWeights* packer) {
  absl::StatusOr<std::string> arch = model.Architecture();
  if (!arch.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", model.path(), "': ", arch.status().message()));
  }
  return ModelLoader(model, *std::move(arch), packer);
}

absl::Status ModelLoader::Error(absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat("model '", model_->path(), "': ", message));
}

absl::Status ModelLoader::Malformed(const absl::Status& s) const { return Error(s.message()); }

std::string ModelLoader::Key(absl::string_view key) const { return absl::StrCat(arch_, ".", key); }
bool ModelLoader::HasKey(absl::string_view key) const { return model_->metadata().Has(Key(key)); }
bool ModelLoader::IsArray(absl::string_view key) const {
  const MetadataValue* v = model_->metadata().Find(Key(key));
  return v != nullptr && v->is_array();
}

absl::StatusOr<int64_t> ModelLoader::Int(absl::string_view key) const {
  return Wrap(model_->metadata().GetInt(Key(key)));
}
absl::StatusOr<int64_t> ModelLoader::IntOr(absl::string_view key, int64_t fallback) const {
  return Wrap(model_->metadata().GetIntOr(Key(key), fallback));
}
absl::StatusOr<int64_t> ModelLoader::IntIn(absl::string_view key, int64_t lo, int64_t hi) const {
  absl::StatusOr<int64_t> v = Int(key);
  if (!v.ok()) return v.status();
  if (*v < lo || *v > hi) {
    return Error(absl::StrCat("key '", Key(key), "' = ", *v, " is out of range [", lo, ", ", hi, "]"));
  }
  return *v;
}
absl::StatusOr<int64_t> ModelLoader::IntInOr(absl::string_view key, int64_t lo, int64_t hi, int64_t fallback) const {
  if (!HasKey(key)) return fallback;
  return IntIn(key, lo, hi);
}
absl::StatusOr<double> ModelLoader::Float(absl::string_view key) const {
  return Wrap(model_->metadata().GetFloat(Key(key)));
}
absl::StatusOr<double> ModelLoader::FloatOr(absl::string_view key, double fallback) const {
  return Wrap(model_->metadata().GetFloatOr(Key(key), fallback));
}
absl::StatusOr<bool> ModelLoader::BoolOr(absl::string_view key, bool fallback) const {
  return Wrap(model_->metadata().GetBoolOr(Key(key), fallback));
}
absl::StatusOr<std::string> ModelLoader::StringOr(absl::string_view key, std::string fallback) const {
  return Wrap(model_->metadata().GetStringOr(Key(key), std::move(fallback)));
}
absl::StatusOr<std::vector<int64_t>> ModelLoader::IntArray(absl::string_view key) const {
  return Wrap(model_->metadata().GetIntArray(Key(key)));
}

absl::StatusOr<std::vector<int64_t>> ModelLoader::PerLayer(absl::string_view key, int32_t n_layer) const {
  if (IsArray(key)) {
    absl::StatusOr<std::vector<int64_t>> arr = IntArray(key);
    if (!arr.ok()) return arr.status();
    if (static_cast<int64_t>(arr->size()) < n_layer) {
      return Error(absl::StrCat("key '", Key(key), "' has ", arr->size(), " entries for ", n_layer, " layers"));
    }
    arr->resize(static_cast<size_t>(n_layer));
    return arr;
  }
  absl::StatusOr<int64_t> one = Int(key);
  if (!one.ok()) return one.status();
  return std::vector<int64_t>(static_cast<size_t>(n_layer), *one);
}

absl::StatusOr<std::vector<bool>> ModelLoader::PerLayerFlags(absl::string_view key, int32_t n_layer) const {
  absl::StatusOr<std::vector<int64_t>> values = PerLayer(key, n_layer);
  if (!values.ok()) return values.status();
  std::vector<bool> flags(values->size());
  for (size_t i = 0; i < flags.size(); ++i) flags[i] = (*values)[i] != 0;
  return flags;
}

absl::StatusOr<const TensorInfo*> ModelLoader::Tensor(const std::string& name,
                                                      const std::vector<int64_t>& shape) const {
  const TensorInfo* t = model_->FindTensor(name);
  if (t == nullptr) return Error(absl::StrCat("tensor '", name, "' is missing"));
  if (TrimmedShape(t->shape) != TrimmedShape(shape)) {
    return Error(absl::StrCat("tensor '", name, "' has shape [", absl::StrJoin(t->shape, ", "), "], expected [",
                              absl::StrJoin(shape, ", "), "]"));
  }
  return t;
}

absl::StatusOr<WeightMatrix> ModelLoader::Matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
  absl::StatusOr<WeightMatrix> rows = RowMatrix(name, n_in, n_out);
  if (!rows.ok() || packer_ == nullptr) return rows;
  return packer_->Pack(*rows);
}

absl::StatusOr<WeightMatrix> ModelLoader::RowMatrix(const std::string& name, int64_t n_in, int64_t n_out) const {
  absl::StatusOr<const TensorInfo*> t = Tensor(name, {n_in, n_out});
  if (!t.ok()) return t.status();
  return WeightMatrix::FromTensor(**t);
}

absl::StatusOr<std::vector<float>> ModelLoader::F32(const std::string& name, const std::vector<int64_t>& shape) const {
  absl::StatusOr<const TensorInfo*> t = Tensor(name, shape);
  if (!t.ok()) return t.status();
  return DequantizeTensor(**t);
}

absl::StatusOr<std::vector<float>> ModelLoader::Vector(const std::string& name, int64_t n) const {
  const TensorInfo* t = model_->FindTensor(name);
  if (t == nullptr) return Error(absl::StrCat("tensor '", name, "' is missing"));
  if (t->n_elements() != n) {
    return Error(absl::StrCat("tensor '", name, "' has ", t->n_elements(), " elements, expected ", n));
  }
  return DequantizeTensor(*t);
}

absl::StatusOr<std::vector<float>> ModelLoader::OptionalVector(const std::string& name, int64_t n) const {
  if (!HasTensor(name)) return std::vector<float>();
  return Vector(name, n);
}

}  // namespace cairn
