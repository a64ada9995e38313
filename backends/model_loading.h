// Helpers shared by the backend families (transformer, swa, recurrent,
// hybrid) for reading a model's weights and hyperparameters at load time.
//
// Contract:
// - Every function only reads the ModelFile / Metadata it is given; tensors
//   are dequantized (F32 vectors) or wrapped without copying (WeightMatrix,
//   which points into the mapped file and must not outlive the ModelFile).
// - Errors are absl::InvalidArgumentError unless stated otherwise, and name the
//   tensor or key and, for shape errors, the actual and the expected shapes.
//   The exact wording is part of the contract (tests match on it): two shape
//   checks coexist because the families historically differ:
//     * LoadVector / LoadMatrix ("model '<path>': " prefix): a vector by
//       element count, a matrix by row size and number of rows.
//     * GetShaped / LoadF32 / LoadShapedMatrix: the shape compared without
//       trailing 1s; a missing tensor is ModelFile::GetTensor's error; the
//       "model '<path>': " prefix only with PathInErrors::kYes.
// - No function keeps a reference to its arguments.
#ifndef CAIRN_BACKENDS_MODEL_LOADING_H_
#define CAIRN_BACKENDS_MODEL_LOADING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/kernels/matmul.h"
#include "backends/model/gguf.h"
#include "backends/model/metadata.h"

namespace cairn {

// A metadata error (missing key, wrong type) makes the file malformed for the
// family: InvalidArgument "model '<path>': <s.message()>".
absl::Status MalformedModel(const absl::Status& s, const std::string& path);

// Reads a 1-D tensor of `n` elements of any type as F32. Missing: an empty
// vector when !required, else "model '<path>': tensor '<name>' is missing".
// Wrong size: "model '<path>': tensor '<name>' has <k> elements, expected <n>".
absl::StatusOr<std::vector<float>> LoadVector(const ModelFile& m, const std::string& name, int64_t n,
                                              bool required);

// A matrix of rows of `n_in` values, `n_out` rows (shape [n_in, n_out], or
// more dimensions whose product past the first is n_out). Errors:
// "model '<path>': tensor '<name>' is missing" or
// "model '<path>': tensor '<name>' has shape [a, b], expected [n_in, n_out]".
absl::StatusOr<WeightMatrix> LoadMatrix(const ModelFile& m, const std::string& name, int64_t n_in, int64_t n_out);

// Shape without trailing 1s: GGUF writers differ in whether they keep them
// ([8] vs [1, 8] is not the same, [8, 1] vs [8] is).
std::vector<int64_t> TrimmedShape(std::vector<int64_t> shape);

enum class PathInErrors { kNo, kYes };

// The tensor `name` whose trimmed shape equals the trimmed `expected`.
// Missing: ModelFile::GetTensor's status. Wrong shape:
// "[model '<path>': ]tensor '<name>' has shape [..], expected [..]".
absl::StatusOr<const TensorInfo*> GetShaped(const ModelFile& m, const std::string& name,
                                            const std::vector<int64_t>& expected,
                                            PathInErrors path_in_errors = PathInErrors::kNo);

// GetShaped, then dequantized to F32.
absl::StatusOr<std::vector<float>> LoadF32(const ModelFile& m, const std::string& name,
                                           const std::vector<int64_t>& expected,
                                           PathInErrors path_in_errors = PathInErrors::kNo);

// GetShaped with {n_in, n_out}, then wrapped as a WeightMatrix.
absl::StatusOr<WeightMatrix> LoadShapedMatrix(const ModelFile& m, const std::string& name, int64_t n_in,
                                              int64_t n_out, PathInErrors path_in_errors = PathInErrors::kNo);

// A per-layer integer hyperparameter: a scalar (repeated n_layer times) or an
// array of exactly n_layer values ("key '<key>' has <k> entries for <n>
// layers" otherwise). A missing key or wrong type: Metadata's status, unwrapped.
absl::StatusOr<std::vector<int64_t>> PerLayer(const Metadata& md, const std::string& key, int32_t n_layer);

}  // namespace cairn

// `lhs = *expr` for an absl::StatusOr `expr`, or return its status.
#define CAIRN_LOAD_ASSIGN(lhs, expr)              \
  do {                                            \
    auto cairn_v_ = (expr);                       \
    if (!cairn_v_.ok()) return cairn_v_.status(); \
    lhs = std::move(*cairn_v_);                   \
  } while (0)

// As CAIRN_LOAD_ASSIGN, but an error is returned as MalformedModel(status, path).
#define CAIRN_LOAD_ASSIGN_MD(lhs, expr, path)                               \
  do {                                                                      \
    auto cairn_v_ = (expr);                                                 \
    if (!cairn_v_.ok()) return ::cairn::MalformedModel(cairn_v_.status(), path); \
    lhs = std::move(*cairn_v_);                                             \
  } while (0)

#endif  // CAIRN_BACKENDS_MODEL_LOADING_H_
