// Reading an architecture's hyperparameters and weights at load time, with
// errors that name the model file and the key or tensor at fault. Shared by
// every wiring file and block so that a malformed model is reported the same
// way whatever its architecture.
//
// Contract:
// - ModelLoader only reads the ModelFile it is given; WeightMatrix values
//   point into the mapped file (they must not outlive it) or, with a
//   PackedWeights, into its packed copies; vectors are F32 copies
//   (dequantized when stored in another type).
// - Every error is INVALID_ARGUMENT ("the file is malformed for its
//   architecture") prefixed "model '<path>': ", and names the key or tensor:
//   a missing key or tensor, a value of the wrong type, a shape that differs
//   from the expected one (both shapes given, trailing 1s ignored), a
//   per-layer array of the wrong length.
// - Thread-compatible: const methods only, no state beyond the file.
#ifndef CAIRN_BACKENDS_LAYERS_MODEL_LOADING_H_
#define CAIRN_BACKENDS_LAYERS_MODEL_LOADING_H_

#include <cstdint>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/kernels/matmul.h"
#include "backends/layers/packed_weights.h"
#include "backends/model/gguf.h"
#include "backends/model/metadata.h"

namespace cairn {

// "blk.<layer>.<name>": the GGUF name of a per-layer tensor.
std::string BlockTensor(int64_t layer, absl::string_view name);

class ModelLoader {
 public:
  // The loader of `model`, whose general.architecture names the keys'
  // prefix. Error when that key is missing.
  // With `packer`, Matrix returns matrices packed by it (packed_weights.h);
  // it must outlive the loaded model.
  static absl::StatusOr<ModelLoader> For(const ModelFile& model, PackedWeights* packer = nullptr);

  const ModelFile& file() const { return *model_; }
  const std::string& arch() const { return arch_; }

  // An INVALID_ARGUMENT error about this model: "model '<path>': <message>".
  absl::Status Error(absl::string_view message) const;

  // --- Metadata keys "<arch>.<key>". The *Or forms apply the default only
  // when the key is absent; a present key of the wrong type is an error.
  std::string Key(absl::string_view key) const;
  bool HasKey(absl::string_view key) const;
  bool IsArray(absl::string_view key) const;
  absl::StatusOr<int64_t> Int(absl::string_view key) const;
  absl::StatusOr<int64_t> IntOr(absl::string_view key, int64_t fallback) const;
  // Int within [lo, hi]; upper bounds keep a hostile file from asking for
  // absurd allocations.
  absl::StatusOr<int64_t> IntIn(absl::string_view key, int64_t lo, int64_t hi) const;
  absl::StatusOr<int64_t> IntInOr(absl::string_view key, int64_t lo, int64_t hi, int64_t fallback) const;
  absl::StatusOr<double> Float(absl::string_view key) const;
  absl::StatusOr<double> FloatOr(absl::string_view key, double fallback) const;
  absl::StatusOr<bool> BoolOr(absl::string_view key, bool fallback) const;
  absl::StatusOr<std::string> StringOr(absl::string_view key, std::string fallback) const;
  absl::StatusOr<std::vector<int64_t>> IntArray(absl::string_view key) const;
  // A per-layer integer: a scalar (repeated n_layer times) or an array of at
  // least n_layer entries (the first n_layer are used: some files carry
  // entries for blocks that are not run, such as MTP blocks).
  absl::StatusOr<std::vector<int64_t>> PerLayer(absl::string_view key, int32_t n_layer) const;
  // PerLayer(key, n_layer) as flags: nonzero is true.
  absl::StatusOr<std::vector<bool>> PerLayerFlags(absl::string_view key, int32_t n_layer) const;

  // --- Tensors by full GGUF name.
  bool HasTensor(const std::string& name) const { return model_->FindTensor(name) != nullptr; }
  // The tensor, whose shape must equal `shape` (trailing 1s ignored).
  absl::StatusOr<const TensorInfo*> Tensor(const std::string& name, const std::vector<int64_t>& shape) const;
  // A matrix of n_out rows of n_in values (GGUF shape [n_in, n_out]),
  // packed when the loader has a PackedWeights (then only MatMul with
  // kInt8Activations may read it).
  absl::StatusOr<WeightMatrix> Matrix(const std::string& name, int64_t n_in, int64_t n_out) const;
  // Matrix, always in GGUF rows: for products that keep F32 activations
  // whatever the backend's precision (a MoE router: its top-k would flip).
  absl::StatusOr<WeightMatrix> RowMatrix(const std::string& name, int64_t n_in, int64_t n_out) const;
  // A tensor of `shape` as F32 values.
  absl::StatusOr<std::vector<float>> F32(const std::string& name, const std::vector<int64_t>& shape) const;
  // A vector of n values (any shape with n elements), as F32.
  absl::StatusOr<std::vector<float>> Vector(const std::string& name, int64_t n) const;
  // Vector, or an empty vector when the tensor is absent.
  absl::StatusOr<std::vector<float>> OptionalVector(const std::string& name, int64_t n) const;

 private:
  ModelLoader(const ModelFile& model, std::string arch, PackedWeights* packer)
      : model_(&model), arch_(std::move(arch)), packer_(packer) {}
  // A metadata status with this model's prefix, as INVALID_ARGUMENT.
  absl::Status Malformed(const absl::Status& s) const;
  template <typename T>
  absl::StatusOr<T> Wrap(absl::StatusOr<T> v) const {
    if (!v.ok()) return Malformed(v.status());
    return v;
  }

  const ModelFile* model_;
  std::string arch_;
  PackedWeights* packer_;  // null: matrices stay GGUF rows
};

}  // namespace cairn

// `lhs = *expr` for an absl::StatusOr `expr`, or return its status.
#define CAIRN_LOAD_ASSIGN(lhs, expr)              \
  do {                                            \
    auto cairn_v_ = (expr);                       \
    if (!cairn_v_.ok()) return cairn_v_.status(); \
    lhs = std::move(*cairn_v_);                   \
  } while (0)

// Return `expr` (an absl::Status) when it is not OK.
#define CAIRN_RETURN_IF_ERROR(expr)                                      \
  do {                                                                   \
    if (absl::Status cairn_s_ = (expr); !cairn_s_.ok()) return cairn_s_; \
  } while (0)

#endif  // CAIRN_BACKENDS_LAYERS_MODEL_LOADING_H_
