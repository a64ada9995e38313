// The attention tiles (attention_tiles.h) in plain C++, one query at a time,
// for CPUs without AVX2+FMA (or under CAIRN_ISA=portable). Compiled with
// -ffp-contract=off: a multiply-add the compiler fused in one loop and not in
// another would round differently.
#include "backends/kernels/attention_tiles.h"

namespace cairn::attention_portable {
namespace {

constexpr int kLanes = 8;

float Score(const float* q, const float* r, int32_t dim) {
  float lanes[kLanes] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int32_t d = 0; d < dim; ++d) lanes[d % kLanes] = q[d] * r[d] + lanes[d % kLanes];
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

void Dots(const float* const* q, int64_t nq, const float* const* rows, const int64_t* begin, const int64_t* end,
          int32_t dim, float* scores, int64_t stride) {
  for (int64_t i = 0; i < nq; ++i) {
    for (int64_t j = begin[i]; j < end[i]; ++j) scores[i * stride + j] = Score(q[i], rows[j], dim);
  }
}

void WeightedSums(const float* w, int64_t stride, int64_t nq, const int64_t* begin, const int64_t* end,
                  const float* const* rows, int32_t dim, float* const* out) {
  for (int64_t i = 0; i < nq; ++i) {
    float* o = out[i];
    for (int32_t d = 0; d < dim; ++d) o[d] = 0.0f;
    for (int64_t j = begin[i]; j < end[i]; ++j) {
      const float wj = w[i * stride + j];
      if (wj == 0.0f) continue;
      const float* r = rows[j];
      for (int32_t d = 0; d < dim; ++d) o[d] = wj * r[d] + o[d];
    }
  }
}

}  // namespace

const AttentionTiles kTiles = {Dots, WeightedSums};

}  // namespace cairn::attention_portable
