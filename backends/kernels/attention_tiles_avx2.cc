// The attention tiles (attention_tiles.h) with AVX2+FMA, compiled with those
// flags whatever CAIRN_NATIVE says; attention.cc calls them only where the
// CPU runs them. Register tiles of 12 accumulators, each operand loaded once
// into a register: scores of 3 queries x 4 rows (7 loads for 12
// multiply-adds), weighted sums of 3 queries x 32 dimensions (4 value
// vectors and 3 broadcast weights). Fewer queries (decode; the last tile)
// take the smaller instances of the same templates, whose per-element
// operations are the same. No std:: templates or header inline functions here (gemm_avx2.h).
#include <immintrin.h>

#include "backends/kernels/attention_tiles.h"

namespace cairn::attention_avx2 {
namespace {

constexpr int kScoredQueries = 3;     // queries scored together (fewer in the last tile)
constexpr int kSummedQueries = 3;     // queries summed together (fewer in the last tile)
constexpr int kRowsPerTile = 4;       // rows scored together
constexpr int kVectorsPerTile = 4;    // 8-float vectors of out per query in a weighted-sum tile
constexpr int64_t kRowsPerPass = 32;  // value rows one weighted-sum pass keeps in L1
// Rows are a token's width apart in the caches, a stride the hardware
// prefetchers do not follow from page to page: the tiles ask for the row
// this many rows ahead while they work on the current one.
constexpr int64_t kPrefetchRows = 16;

// Asks for floats [d0, d1) of row into L1.
void Prefetch(const float* row, int32_t d0, int32_t d1) {
  for (int32_t d = d0; d < d1; d += 16) _mm_prefetch(reinterpret_cast<const char*>(row + d), _MM_HINT_T0);
}

// Lanes below n (1 <= n <= 8) set: the mask of a dimension tail.
__m256i TailMask(int32_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Makes the compiler keep v in a register: without it, GCC folds a load
// used by several multiply-adds into each of them, and the tiles, which
// need all their loads, load the same vector once per use.
inline __attribute__((always_inline)) void InRegister(__m256& v) { __asm__("" : "+x"(v)); }

// Each of the four accumulators reduced as ((l0 + l1) + (l2 + l3)) +
// ((l4 + l5) + (l6 + l7)): horizontal adds pair neighbours within each
// 128-bit half, the last add joins the halves.
__m128 Reduce4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

// The range of rows any of n queries sees; empty (lo >= hi) if none.
void UnionOfRanges(const int64_t* begin, const int64_t* end, int64_t n, int64_t* lo, int64_t* hi) {
  *lo = INT64_MAX;
  *hi = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (end[i] <= begin[i]) continue;
    *lo = begin[i] < *lo ? begin[i] : *lo;
    *hi = end[i] > *hi ? end[i] : *hi;
  }
}

// Calls body.operator()<kQ>(i) for consecutive tiles of queries [i, i + kQ)
// covering [0, nq): kTile each, the last one smaller.
template <int kTile, typename Body>
void ForQueryTiles(int64_t nq, const Body& body) {
  int64_t i = 0;
  for (; i + kTile <= nq; i += kTile) body.template operator()<kTile>(i);
  if constexpr (kTile > 2) {
    if (nq - i == 2) body.template operator()<2>(i);
  }
  if (nq - i == 1) body.template operator()<1>(i);
}

// Whether one of kQ queries sees a row of [j0, j1).
template <int kQ>
bool SeesAny(const int64_t* begin, const int64_t* end, int64_t j0, int64_t j1) {
  bool seen = false;
#pragma GCC unroll 8
  for (int i = 0; i < kQ; ++i) seen |= begin[i] < j1 && end[i] > j0 && end[i] > begin[i];
  return seen;
}

// Scores of kQ queries against four rows, each lane chain advancing by
// 8 dimensions per step; the dimension tail is loaded masked (zeros).
template <int kQ>
void ScoreTile(const float* const* q, const float* const* r, int32_t dim, __m128* out) {
  __m256 acc[kQ][kRowsPerTile];
#pragma GCC unroll 8
  for (int i = 0; i < kQ; ++i) {
#pragma GCC unroll 8
    for (int c = 0; c < kRowsPerTile; ++c) acc[i][c] = _mm256_setzero_ps();
  }
  int32_t d = 0;
  for (; d + 8 <= dim; d += 8) {
    __m256 qv[kQ];
#pragma GCC unroll 8
    for (int i = 0; i < kQ; ++i) {
      qv[i] = _mm256_loadu_ps(q[i] + d);
      InRegister(qv[i]);
    }
#pragma GCC unroll 8
    for (int c = 0; c < kRowsPerTile; ++c) {
      __m256 rv = _mm256_loadu_ps(r[c] + d);
      InRegister(rv);
#pragma GCC unroll 8
      for (int i = 0; i < kQ; ++i) acc[i][c] = _mm256_fmadd_ps(qv[i], rv, acc[i][c]);
    }
  }
  if (d < dim) {
    const __m256i mask = TailMask(dim - d);
    __m256 qv[kQ];
#pragma GCC unroll 8
    for (int i = 0; i < kQ; ++i) qv[i] = _mm256_maskload_ps(q[i] + d, mask);
#pragma GCC unroll 8
    for (int c = 0; c < kRowsPerTile; ++c) {
      const __m256 rv = _mm256_maskload_ps(r[c] + d, mask);
#pragma GCC unroll 8
      for (int i = 0; i < kQ; ++i) acc[i][c] = _mm256_fmadd_ps(qv[i], rv, acc[i][c]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kQ; ++i) out[i] = Reduce4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}

// Scores of kQ queries against the rows r (n_valid <= 4 of them kept)
// into scores[i * stride + c].
template <int kQ>
void ScoreQueries(const float* const* q, const float* const* r, int64_t n_valid, int32_t dim, float* scores,
                  int64_t stride) {
  __m128 s[kQ];
  ScoreTile<kQ>(q, r, dim, s);
#pragma GCC unroll 8
  for (int i = 0; i < kQ; ++i) {
    if (n_valid == kRowsPerTile) {
      _mm_storeu_ps(scores + i * stride, s[i]);
      continue;
    }
    float tile[kRowsPerTile];
    _mm_storeu_ps(tile, s[i]);
    for (int64_t c = 0; c < n_valid; ++c) scores[i * stride + c] = tile[c];
  }
}

// Rows outer, queries inner: a group of four rows stays in L1 while every
// tile of queries that sees one of them scores it; a last partial group
// repeats its last row (scores computed and dropped).
void Dots(const float* const* q, int64_t nq, const float* const* rows, const int64_t* begin, const int64_t* end,
          int32_t dim, float* scores, int64_t stride) {
  int64_t lo = 0, hi = 0;
  UnionOfRanges(begin, end, nq, &lo, &hi);
  for (int64_t j = lo; j < hi; j += kRowsPerTile) {
    const float* r[kRowsPerTile];
#pragma GCC unroll 8
    for (int c = 0; c < kRowsPerTile; ++c) r[c] = rows[j + c < hi ? j + c : hi - 1];
    const int64_t n_valid = hi - j < kRowsPerTile ? hi - j : kRowsPerTile;
#pragma GCC unroll 8
    for (int c = 0; c < kRowsPerTile; ++c) {
      if (j + kPrefetchRows + c < hi) Prefetch(rows[j + kPrefetchRows + c], 0, dim);
    }
    ForQueryTiles<kScoredQueries>(nq, [&]<int kQ>(int64_t i) {
      if (SeesAny<kQ>(begin + i, end + i, j, j + kRowsPerTile)) {
        ScoreQueries<kQ>(q + i, r, n_valid, dim, scores + i * stride + j, stride);
      }
    });
  }
}

// The rows [lo, hi) a tile of queries adds: those in [common_lo, common_hi)
// every query of the tile sees; `dense` when none of those has a weight of
// zero for any of them, so that they need no test per row and query.
struct TileRows {
  int64_t lo, common_lo, common_hi, hi;
  bool dense;
  int64_t n_rows;  // rows[] holds this many (the bound of prefetching)
};

// Whether a query of kQ has a weight of exactly zero (either sign) in
// [j0, j1).
template <int kQ>
bool AnyZeroWeight(const float* const* w, int64_t j0, int64_t j1) {
  const __m256 zero = _mm256_setzero_ps();
  __m256 found = zero;
  bool tail_found = false;
#pragma GCC unroll 8
  for (int i = 0; i < kQ; ++i) {
    int64_t j = j0;
    for (; j + 8 <= j1; j += 8) found = _mm256_or_ps(found, _mm256_cmp_ps(_mm256_loadu_ps(w[i] + j), zero, _CMP_EQ_OQ));
    for (; j < j1; ++j) tail_found |= w[i][j] == 0.0f;
  }
  return tail_found || _mm256_movemask_ps(found) != 0;
}

// Dimensions [d, d + 8 * kV) of kQ queries' weighted sums (kMasked: one
// vector, its lanes below `mask`) continued over the rows of r from the sums
// so far in out: a row outside a query's range, or of weight zero for it, is
// skipped for it. Dense rows take each query's weight and each value vector
// into a register once (kQ x kV multiply-adds for kV + kQ loads).
template <int kQ, int kV, bool kMasked>
__attribute__((noinline)) void SumTile(const float* const* w, const int64_t* begin, const int64_t* end,
                                       const float* const* rows, const TileRows& r, int32_t d, __m256i mask,
                                       float* const* out) {
  __m256 acc[kQ][kV];
#pragma GCC unroll 8
  for (int i = 0; i < kQ; ++i) {
#pragma GCC unroll 8
    for (int c = 0; c < kV; ++c) {
      acc[i][c] = kMasked ? _mm256_maskload_ps(out[i] + d, mask) : _mm256_loadu_ps(out[i] + d + 8 * c);
    }
  }
  const auto load = [&](int64_t j, int c) __attribute__((always_inline)) {
    return kMasked ? _mm256_maskload_ps(rows[j] + d, mask) : _mm256_loadu_ps(rows[j] + d + 8 * c);
  };
  const auto add_row = [&](int64_t j, bool checked) __attribute__((always_inline)) {
#pragma GCC unroll 8
    for (int i = 0; i < kQ; ++i) {
      const float wj = !checked || (j >= begin[i] && j < end[i]) ? w[i][j] : 0.0f;
      if (wj == 0.0f) continue;
      const __m256 wv = _mm256_set1_ps(wj);
#pragma GCC unroll 8
      for (int c = 0; c < kV; ++c) acc[i][c] = _mm256_fmadd_ps(wv, load(j, c), acc[i][c]);
    }
  };
  const auto add_dense_row = [&](int64_t j) __attribute__((always_inline)) {
    __m256 wv[kQ];
#pragma GCC unroll 8
    for (int i = 0; i < kQ; ++i) wv[i] = _mm256_broadcast_ss(w[i] + j);
#pragma GCC unroll 8
    for (int c = 0; c < kV; ++c) {
      __m256 rv = load(j, c);
      InRegister(rv);
#pragma GCC unroll 8
      for (int i = 0; i < kQ; ++i) acc[i][c] = _mm256_fmadd_ps(wv[i], rv, acc[i][c]);
    }
  };
  const auto ahead = [&](int64_t j) __attribute__((always_inline)) {
    if (j + kPrefetchRows < r.n_rows) Prefetch(rows[j + kPrefetchRows], d, d + 8 * kV);
  };
  for (int64_t j = r.lo; j < r.common_lo; ++j) {
    ahead(j);
    add_row(j, true);
  }
  if (r.dense) {
    for (int64_t j = r.common_lo; j < r.common_hi; ++j) {
      ahead(j);
      add_dense_row(j);
    }
  } else {
    for (int64_t j = r.common_lo; j < r.common_hi; ++j) {
      ahead(j);
      add_row(j, false);
    }
  }
  for (int64_t j = r.common_hi; j < r.hi; ++j) {
    ahead(j);
    add_row(j, true);
  }
#pragma GCC unroll 8
  for (int i = 0; i < kQ; ++i) {
#pragma GCC unroll 8
    for (int c = 0; c < kV; ++c) {
      if constexpr (kMasked) {
        _mm256_maskstore_ps(out[i] + d, mask, acc[i][c]);
      } else {
        _mm256_storeu_ps(out[i] + d + 8 * c, acc[i][c]);
      }
    }
  }
}

// kQ queries' sums continued over the rows of [j0, j1) that one of them sees
// (rows[] holds n_rows).
template <int kQ>
void SumQueries(const float* const* w, const int64_t* begin, const int64_t* end, const float* const* rows,
                int64_t n_rows, int64_t j0, int64_t j1, int32_t dim, float* const* out) {
  TileRows r;
  r.n_rows = n_rows;
  UnionOfRanges(begin, end, kQ, &r.lo, &r.hi);
  r.lo = r.lo > j0 ? r.lo : j0;
  r.hi = r.hi < j1 ? r.hi : j1;
  if (r.lo >= r.hi) return;
  r.common_lo = r.lo;
  r.common_hi = r.hi;
#pragma GCC unroll 8
  for (int i = 0; i < kQ; ++i) {
    r.common_lo = begin[i] > r.common_lo ? begin[i] : r.common_lo;
    r.common_hi = end[i] < r.common_hi ? end[i] : r.common_hi;
  }
  if (r.common_lo >= r.common_hi) r.common_lo = r.common_hi = r.hi;
  r.dense = !AnyZeroWeight<kQ>(w, r.common_lo, r.common_hi);
  const __m256i all = _mm256_set1_epi32(-1);
  int32_t d = 0;
  for (; d + 8 * kVectorsPerTile <= dim; d += 8 * kVectorsPerTile) {
    SumTile<kQ, kVectorsPerTile, false>(w, begin, end, rows, r, d, all, out);
  }
  for (; d + 8 <= dim; d += 8) SumTile<kQ, 1, false>(w, begin, end, rows, r, d, all, out);
  if (d < dim) SumTile<kQ, 1, true>(w, begin, end, rows, r, d, TailMask(dim - d), out);
}

// From zeros, rows in passes of kRowsPerPass: a pass's rows stay in L1
// while every tile of queries adds them to its sums (kept in out between
// passes, exactly).
void WeightedSums(const float* w, int64_t stride, int64_t nq, const int64_t* begin, const int64_t* end,
                  const float* const* rows, int32_t dim, float* const* out) {
  for (int64_t i = 0; i < nq; ++i) {
    for (int32_t d = 0; d < dim; ++d) out[i][d] = 0.0f;
  }
  int64_t lo = 0, hi = 0;
  UnionOfRanges(begin, end, nq, &lo, &hi);
  for (int64_t j0 = lo; j0 < hi; j0 += kRowsPerPass) {
    const int64_t j1 = j0 + kRowsPerPass < hi ? j0 + kRowsPerPass : hi;
    ForQueryTiles<kSummedQueries>(nq, [&]<int kQ>(int64_t i) {
      const float* wq[kQ];
#pragma GCC unroll 8
      for (int t = 0; t < kQ; ++t) wq[t] = w + (i + t) * stride;
      SumQueries<kQ>(wq, begin + i, end + i, rows, hi, j0, j1, dim, out + i);
    });
  }
}

}  // namespace

const AttentionTiles kTiles = {Dots, WeightedSums};

}  // namespace cairn::attention_avx2
