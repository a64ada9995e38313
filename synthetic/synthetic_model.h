// Synthetic models: real GGUF images (written by GgufWriter) of a real
// architecture with deterministic random weights, for the server's built-in
// demo models, the benchmarks and the tests.
//
// Why a top-level folder of its own: the server links it (its demo models
// let it start with no model file), and so do bench/ and tests/, which must
// not depend on the service to build a model; nothing that computes
// (backends/) may depend on it. It depends on backends/model (the GGUF
// writer and reader) only.
//
// A SyntheticModel is metadata plus an ordered list of tensors, each with a
// shape and an Init saying how its values are drawn. The architecture
// builders (synthetic/architectures.h) return one with every key and tensor
// their loader reads; a caller may then edit it (a key, a tensor's Init or
// values, a tensor removed or added) before serializing it.
//
// Values are drawn in tensor order from one xorshift generator seeded by
// `seed`, when the model is serialized (lazily: a benchmark's model is never
// held twice as floats) or materialized. Materialize() fixes every value, so
// that edits made afterwards (one tensor changed or removed) leave the
// others as they were; Values() materializes first.
//
// Matrices (tensors added as weights) are stored in `weight_type` when their
// rows fit its blocks: F16/BF16 and Q8_0 round the drawn values; the other
// quantized types get random blocks whose scales give the Init's magnitude
// (no quantizer for them here: benchmarks need their sizes, not their values).
//
// Not thread-safe; a built model is a value (copyable).
#ifndef CAIRN_SYNTHETIC_SYNTHETIC_MODEL_H_
#define CAIRN_SYNTHETIC_SYNTHETIC_MODEL_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/model/ggml_type.h"
#include "backends/model/gguf.h"
#include "backends/model/gguf_writer.h"
#include "synthetic/xorshift_rng.h"

namespace cairn::synthetic {

using Rng = XorShiftRng;

// How one tensor's values are drawn.
struct Init {
  enum class Kind {
    kConstant,    // every value `a`
    kUniform,     // uniform in [a, b)
    kRowUniform,  // row r uniform in [-row_half_width[r], +row_half_width[r]); rows of 0 are zeros (no draws)
    kValues,      // `values` as given (no draws)
  };
  Kind kind = Kind::kConstant;
  float a = 0.0f, b = 0.0f;
  std::vector<float> row_half_width;
  std::vector<float> values;

  static Init Constant(float v) { return Init{Kind::kConstant, v, v, {}, {}}; }
  static Init Ones() { return Constant(1.0f); }
  static Init Uniform(float lo, float hi) { return Init{Kind::kUniform, lo, hi, {}, {}}; }
  static Init Symmetric(float half_width) { return Uniform(-half_width, half_width); }
  // Uniform in +-1/sqrt(n_in): a matrix that keeps its output of the order of its input.
  static Init FanIn(int64_t n_in);
  static Init RowUniform(std::vector<float> half_widths) {
    return Init{Kind::kRowUniform, 0.0f, 0.0f, std::move(half_widths), {}};
  }
  static Init Values(std::vector<float> v) { return Init{Kind::kValues, 0.0f, 0.0f, {}, std::move(v)}; }

  // The largest magnitude a drawn value can have (the scale of random
  // quantized blocks).
  float magnitude() const;
};

struct SyntheticTensor {
  std::string name;
  std::vector<int64_t> shape;  // GGUF order: shape[0] is the row length
  Init init;
  bool weight = false;  // stored in the model's weight_type where its rows fit
  int64_t n_elements() const;
};

class SyntheticModel {
 public:
  // A model of `arch` (general.architecture).
  explicit SyntheticModel(std::string arch);

  const std::string& arch() const { return arch_; }
  // "<arch>.<key>".
  std::string Key(const std::string& key) const { return arch_ + "." + key; }
  // The metadata, general.architecture set; keys are replaced in place.
  GgufWriter& metadata() { return metadata_; }

  uint64_t seed = Rng::kDefaultSeed;
  GgmlType weight_type = GgmlType::kF32;

  // Appends a tensor (a name taken already is replaced, keeping its place).
  void Add(std::string name, std::vector<int64_t> shape, Init init);
  // Appends a weight: a matrix [n_in, n_out] (or an expert stack
  // [n_in, n_out, n_expert]), by default FanIn(n_in).
  void AddWeight(std::string name, std::vector<int64_t> shape);
  void AddWeight(std::string name, std::vector<int64_t> shape, Init init);
  void AddOnes(std::string name, std::vector<int64_t> shape) { Add(std::move(name), std::move(shape), Init::Ones()); }

  std::span<SyntheticTensor> tensors() { return tensors_; }
  std::span<const SyntheticTensor> tensors() const { return tensors_; }
  // The tensor named `name`, or null.
  SyntheticTensor* Find(const std::string& name);
  // Removes it; false when there is none.
  bool Remove(const std::string& name);

  // Draws every value not drawn yet (each tensor's Init becomes kValues).
  void Materialize();
  // The values of `name` as drawn (materializing the model first); the
  // tensor must exist.
  std::vector<float>& Values(const std::string& name);

  // The GGUF image. INVALID_ARGUMENT naming the tensor when its values do
  // not fit its shape, or given values must go into a type stored as random
  // blocks.
  absl::StatusOr<std::vector<uint8_t>> Serialize() const;
  // Serialize() opened as a model named `name` (errors: Serialize's and
  // ModelFile::FromBuffer's).
  absl::StatusOr<std::shared_ptr<const ModelFile>> Open(const std::string& name) const;

 private:
  std::string arch_;
  GgufWriter metadata_;
  std::vector<SyntheticTensor> tensors_;
};

// Q8_0 blocks of 32 values: an fp16 scale max|x| / 127, then the 32 values
// divided by it, rounded to int8. `values.size()` must be a multiple of 32.
std::vector<uint8_t> QuantizeQ8_0(std::span<const float> values);

// `n` values of `type` as blocks of random quants whose scale (and minimum)
// give values of about `magnitude`: what a benchmark needs of a type cairn
// cannot quantize to (the K-quants, Q4_0, ...).
std::vector<uint8_t> RandomBlocks(GgmlType type, int64_t n, float magnitude, Rng& rng);

}  // namespace cairn::synthetic

#endif  // CAIRN_SYNTHETIC_SYNTHETIC_MODEL_H_
