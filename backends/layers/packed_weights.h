// The weight matrices of a model repacked at load into the layout of the
// CPU's integer kernel (QuantDotKernel::pack in backends/kernels/quant_dot.h),
// for backends that run 8-bit activations: a decode step is then bound by
// reading the weights, not by unpacking GGUF blocks row by row.
//
// Contract:
// - Pack returns a matrix over a copy this object owns (the WeightMatrix
//   values must not outlive it), or the matrix unchanged when its type and
//   shape have no packed layout on this CPU. The copy has the matrix's
//   size; the file's pages it was made from are released
//   (ModelFile::ReleasePages), so the weights stay about the file's size in
//   resident memory. Packed matrices go through MatMul with
//   kInt8Activations only (matmul.h).
// - Results are the bits of the GGUF rows (pinned by the kernels' tests and
//   by the backends' packed-vs-rows tests).
// - Thread-compatible: used by the single thread that loads the model.
#ifndef CAIRN_BACKENDS_LAYERS_PACKED_WEIGHTS_H_
#define CAIRN_BACKENDS_LAYERS_PACKED_WEIGHTS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/kernels/matmul.h"
#include "backends/kernels/thread_pool.h"
#include "backends/model/gguf.h"

namespace cairn {

class PackedWeights final {
 public:
  // Packs with n_threads threads (0: all cores) the matrices of `model`,
  // which must outlive this object.
  PackedWeights(const ModelFile& model, int32_t n_threads);

  // Ends the threads Pack uses (the copies stay); a later Pack starts them
  // again. For the end of a load: the packed copies live as long as the
  // model, the threads need not.
  void FinishLoading() { pool_.reset(); }

  // RESOURCE_EXHAUSTED when the copy cannot be allocated.
  absl::StatusOr<WeightMatrix> Pack(const WeightMatrix& w);

  int64_t matrices() const { return static_cast<int64_t>(copies_.size()); }
  size_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };

  const ModelFile& model_;
  const int32_t n_threads_;
  std::unique_ptr<ThreadPool> pool_;  // while loading
  std::vector<std::unique_ptr<uint8_t, Free>> copies_;
  size_t bytes_ = 0;
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_PACKED_WEIGHTS_H_
