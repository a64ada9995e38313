#include "backends/model_loading.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/model/dequant.h"

namespace cairn {

absl::Status MalformedModel(const absl::Status& s, const std::string& path) {
  return absl::InvalidArgumentError(absl::StrCat("model '", path, "': ", s.message()));
}

absl::StatusOr<std::vector<float>> LoadVector(const ModelFile& m, const std::string& name, int64_t n,
                                              bool required) {
  const TensorInfo* t = m.FindTensor(name);
  if (!t) {
    if (!required) return std::vector<float>();
    return absl::InvalidArgumentError(absl::StrCat("model '", m.path(), "': tensor '", name, "' is missing"));
  }
  if (t->n_elements() != n) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.path(), "': tensor '", name, "' has ",
                                                   t->n_elements(), " elements, expected ", n));
  }
  return DequantizeTensor(*t);
}

absl::StatusOr<WeightMatrix> LoadMatrix(const ModelFile& m, const std::string& name, int64_t n_in, int64_t n_out) {
  const TensorInfo* t = m.FindTensor(name);
  if (!t) return absl::InvalidArgumentError(absl::StrCat("model '", m.path(), "': tensor '", name, "' is missing"));
  if (t->shape.size() < 2 || t->shape[0] != n_in || t->n_rows() != n_out) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.path(), "': tensor '", name, "' has shape [",
                                                   absl::StrJoin(t->shape, ", "), "], expected [", n_in, ", ",
                                                   n_out, "]"));
  }
  return WeightMatrix::FromTensor(*t);
}

std::vector<int64_t> TrimmedShape(std::vector<int64_t> shape) {
  while (shape.size() > 1 && shape.back() == 1) shape.pop_back();
  return shape;
}

absl::StatusOr<const TensorInfo*> GetShaped(const ModelFile& m, const std::string& name,
                                            const std::vector<int64_t>& expected, PathInErrors path_in_errors) {
  absl::StatusOr<const TensorInfo*> t = m.GetTensor(name);
  if (!t.ok()) return t.status();
  if (TrimmedShape((*t)->shape) != TrimmedShape(expected)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_in_errors == PathInErrors::kYes ? absl::StrCat("model '", m.path(), "': ") : "",
                     "tensor '", name, "' has shape [", absl::StrJoin((*t)->shape, ", "), "], expected [",
                     absl::StrJoin(expected, ", "), "]"));
  }
  return *t;
}

absl::StatusOr<std::vector<float>> LoadF32(const ModelFile& m, const std::string& name,
                                           const std::vector<int64_t>& expected, PathInErrors path_in_errors) {
  absl::StatusOr<const TensorInfo*> t = GetShaped(m, name, expected, path_in_errors);
  if (!t.ok()) return t.status();
  return DequantizeTensor(**t);
}

absl::StatusOr<WeightMatrix> LoadShapedMatrix(const ModelFile& m, const std::string& name, int64_t n_in,
                                              int64_t n_out, PathInErrors path_in_errors) {
  absl::StatusOr<const TensorInfo*> t = GetShaped(m, name, {n_in, n_out}, path_in_errors);
  if (!t.ok()) return t.status();
  return WeightMatrix::FromTensor(**t);
}

absl::StatusOr<std::vector<int64_t>> PerLayer(const Metadata& md, const std::string& key, int32_t n_layer) {
  const MetadataValue* v = md.Find(key);
  if (v && v->is_array()) {
    absl::StatusOr<std::vector<int64_t>> arr = md.GetIntArray(key);
    if (!arr.ok()) return arr.status();
    if (static_cast<int32_t>(arr->size()) != n_layer) {
      return absl::InvalidArgumentError(
          absl::StrCat("key '", key, "' has ", arr->size(), " entries for ", n_layer, " layers"));
    }
    return arr;
  }
  absl::StatusOr<int64_t> one = md.GetInt(key);
  if (!one.ok()) return one.status();
  return std::vector<int64_t>(n_layer, *one);
}

}  // namespace cairn
