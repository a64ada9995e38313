#include "backends/layers/packed_weights.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace cairn {
namespace {

// Cache-line aligned: the kernels' 32-byte loads never straddle two lines
// where the file's own layout did not make them.
constexpr size_t kAlignment = 64;

}  // namespace

void PackedWeights::Free::operator()(uint8_t* p) const { std::free(p); }

PackedWeights::PackedWeights(const ModelFile& model, int32_t n_threads) : model_(model), n_threads_(n_threads) {}

absl::StatusOr<WeightMatrix> PackedWeights::Pack(const WeightMatrix& w) {
  if (w.packed != nullptr || PackingKernel(w.type, w.n_in, w.n_out) == nullptr) return w;
  const size_t bytes = w.bytes();
  auto* copy =
      static_cast<uint8_t*>(std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment));
  if (copy == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes to pack a ",
                                                     std::string(TypeName(w.type)), " matrix of ", w.n_out, " rows"));
  }
  copies_.emplace_back(copy);
  if (pool_ == nullptr) pool_ = std::make_unique<ThreadPool>(n_threads_);
  const WeightMatrix packed = PackWeights(w, copy, *pool_);
  bytes_ += bytes;
  model_.ReleasePages(w.data, bytes);
  return packed;
}

}  // namespace cairn
