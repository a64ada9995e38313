// Private to attention.cc: the two inner loops of attention, one
// implementation per ISA (attention_tiles_avx2.cc, compiled with AVX2+FMA
// whatever CAIRN_NATIVE says, and attention_tiles_portable.cc). As for
// gemm_avx2.h, the AVX2 file emits no out-of-line code a portable file could
// share through the linker: its helpers are in an unnamed namespace and only
// its table below is external.
//
// Each table fixes one operation sequence per output element and computes
// exactly it whatever the number of queries of the call and their grouping
// into register tiles, so that a query's scores and output are a function of
// its own inputs only (attention.h). Within one ISA:
//   score(q, r) = eight lanes, lane l the multiply-add chain over
//                 d = l, l + 8, ... in order from +0 (AVX2: fused; portable:
//                 multiply then add, each rounded), then
//                 ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7));
//   out[d]      = from +0, for each row j in order whose weight w_j is not
//                 zero: out[d] = w_j * r_j[d] + out[d] (AVX2: fused;
//                 portable: multiply then add).
// Rows of weight zero are skipped, not added, so that a row a window hides
// (weight exactly 0) counts as if it had not been passed, even where its
// values are not finite. Thread-safe: no state.
#ifndef CAIRN_BACKENDS_KERNELS_ATTENTION_TILES_H_
#define CAIRN_BACKENDS_KERNELS_ATTENTION_TILES_H_

#include <cstdint>

namespace cairn {

struct AttentionTiles {
  // scores[i * stride + j] = score(q[i], rows[j]) for i < nq and every j in
  // [begin[i], end[i]); other entries of [min begin, max end) may be written
  // with anything. q[i] and rows[j] hold `dim` floats each.
  void (*dots)(const float* const* q, int64_t nq, const float* const* rows, const int64_t* begin, const int64_t* end,
               int32_t dim, float* scores, int64_t stride);
  // out[i][0, dim) = the weighted sum of rows[j] for j in [begin[i], end[i])
  // with weights w[i * stride + j] (zeros for an empty range).
  void (*weighted_sums)(const float* w, int64_t stride, int64_t nq, const int64_t* begin, const int64_t* end,
                        const float* const* rows, int32_t dim, float* const* out);
};

namespace attention_avx2 {
// Runs only where the CPU has AVX2 and FMA.
extern const AttentionTiles kTiles;
}  // namespace attention_avx2

namespace attention_portable {
extern const AttentionTiles kTiles;
}  // namespace attention_portable

}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_ATTENTION_TILES_H_
