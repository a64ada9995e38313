// For the tests of the shared blocks (backends/layers/): random F32 weights
// the blocks read in place, a ForwardPass over rows of several sequences
// with real memories, and the plain double-precision computations the blocks
// are checked against.
#ifndef CAIRN_TESTS_BACKENDS_LAYERS_BLOCK_TEST_UTIL_H_
#define CAIRN_TESTS_BACKENDS_LAYERS_BLOCK_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/kernels/matmul.h"
#include "backends/kernels/thread_pool.h"
#include "backends/layers/forward_pass.h"
#include "backends/layers/work_buffers.h"
#include "backends/memory/layer_memory.h"
#include "gtest/gtest.h"
#include "synthetic/xorshift_rng.h"

namespace cairn::testing {

using Vec = std::vector<double>;

// Deterministic random values; every Random() call continues the sequence.
class Weights {
 public:
  explicit Weights(uint64_t seed = 1) : rng_(seed) {}
  std::vector<float> Random(int64_t n, float lo, float hi) { return rng_.Vec(n, lo, hi); }
  // An [n_in, n_out] matrix (n_out rows of n_in), uniform in +-scale/sqrt(n_in),
  // kept alive here; the returned view points into it.
  WeightMatrix Matrix(int64_t n_in, int64_t n_out, float scale = 1.0f) {
    const float a = scale / std::sqrt(static_cast<float>(n_in));
    kept_.push_back(std::make_unique<std::vector<float>>(Random(n_in * n_out, -a, a)));
    return WeightMatrix{GgmlType::kF32, n_in, n_out, reinterpret_cast<const uint8_t*>(kept_.back()->data())};
  }

 private:
  synthetic::XorShiftRng rng_;
  std::vector<std::unique_ptr<std::vector<float>>> kept_;
};

// The values of a matrix view made by Weights (F32).
inline const float* Data(const WeightMatrix& w) { return reinterpret_cast<const float*>(w.data); }

// y = W x for W of GGUF shape [n_in, n_out].
inline Vec Mul(const WeightMatrix& w, const Vec& x) {
  Vec y(static_cast<size_t>(w.n_out), 0.0);
  for (int64_t o = 0; o < w.n_out; ++o) {
    for (int64_t i = 0; i < w.n_in; ++i) y[o] += static_cast<double>(Data(w)[o * w.n_in + i]) * x[i];
  }
  return y;
}

// RMSNorm of x[off, off + n), scaled by `weight` (when not empty).
inline void RmsNormD(Vec& x, size_t off, size_t n, const std::vector<float>& weight, double eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) x[off + i] *= inv * (weight.empty() ? 1.0 : weight[i]);
}

inline double SiluD(double x) { return x / (1.0 + std::exp(-x)); }
inline double SigmoidD(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double SoftplusD(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

// One Forward call's rows: rows[s] rows for sequence s, continuing where its
// memory stands, every row's logits wanted (or only each sequence's last
// row's). Reserves the memories; Commit() records the rows as absorbed, for
// a following pass.
class Pass {
 public:
  Pass(std::vector<LayerMemory*> memories, std::vector<int64_t> rows, int64_t n_embd, int threads = 2,
       bool last_rows_only = false);
  ForwardPass& operator*() { return *pass_; }
  ForwardPass* operator->() { return pass_.get(); }
  int64_t n_rows() const { return n_rows_; }
  // Where sequence s's rows start in the pass.
  int64_t first_row(size_t s) const { return first_row_[s]; }
  // Room for each sequence's logits (before ForwardPass::Logits), and what
  // it wrote.
  void SizeLogits(int32_t n_vocab) {
    for (RunLogits& r : results_) {
      r.n_vocab = n_vocab;
      r.values.resize(static_cast<size_t>(r.n_rows) * n_vocab);
    }
  }
  const RunLogits& logits(size_t s) const { return results_[s]; }
  void Commit();

 private:
  std::vector<LayerMemory*> memories_;
  std::vector<int64_t> rows_, first_row_;
  int64_t n_rows_ = 0;
  std::vector<std::vector<TokenId>> tokens_;
  std::vector<std::vector<int32_t>> wanted_;
  std::vector<SequenceRun> batch_;
  std::vector<ForwardPass::Segment> segments_;
  std::vector<RunLogits> results_;
  std::vector<std::vector<uint8_t*>> snapshot_states_;
  ThreadPool pool_;
  WorkBuffers buffers_;
  std::unique_ptr<ForwardPass> pass_;
};

// Rows of `width` values: the input of a block, deterministic.
std::vector<float> RandomRows(int64_t rows, int64_t width, uint64_t seed);

// Row r of a [rows][width] F32 array, as doubles.
inline Vec Row(const std::vector<float>& a, int64_t r, int64_t width) {
  return Vec(a.begin() + r * width, a.begin() + (r + 1) * width);
}

// Every value of got's rows [first, first + want.size()) within tol of want
// (relative to the largest |want|), named `what`.
void ExpectRowsNear(const float* got, const std::vector<Vec>& want, double tol, const std::string& what);

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_BACKENDS_LAYERS_BLOCK_TEST_UTIL_H_
