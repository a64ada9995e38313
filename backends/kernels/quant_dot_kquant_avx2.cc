// The K-quant integer dots on AVX2 (+FMA, F16C for the fp16 block scales).
// Compiled with those target flags whatever CAIRN_NATIVE says; the registry
// hands these kernels out only on CPUs that have them.
//
// Sixteen vector registers do not hold a whole unpacked block, so each block
// is unpacked 64 elements at a time (two vectors of 32 unsigned bytes and
// their int16 scale vectors) and used at once by every token of the group:
// vpmaddubsw (u8 x s8 pairs to int16, exact) then vpmaddwd with the scales
// into int32 lanes, summed to an exact integer once per block and
// accumulated in F32 as quant_dot_kquant.h prescribes (the same bits on
// every path and ISA). Mins and Q6_K's -32 are the activations' group sums
// times the weights' mins, one vpmaddwd a block. From 5 tokens on (batched
// decode steps and prompts), 8-row panels take over (below): 1.1-1.3x the
// row-wise rate at 5-8 tokens, about 1.3x at 16 and more.
#include <immintrin.h>

#include <cstring>

#include "backends/kernels/quant_dot_kquant.h"
#include "backends/kernels/quant_dot_kquant_avx2.h"
#include "backends/kernels/quant_dot_kquant_blocks.h"

namespace cairn {
namespace {

// Per block: scale factors, the int16 mins of the 16 groups of 16 elements,
// and the scales the 64-element groups pick from with one vpshufb each
// (Q4_K / Q5_K: scales[0], see HeaderK4; Q6_K: both, see Q6_K::Head).
// vpshufb is one uop on Zen 3 where vpermd is two, and it spares Q4_K /
// Q5_K the per-block broadcasts the vpshufd route needed: single-token rows
// in cache 1.04-1.05x (Q4_K, Q6_K).
struct Header {
  float d, dmin;
  __m256i mins;
  __m256i scales[2];
};

// 64 elements of a block: lo = elements 64g..64g+31, hi = the next 32, with
// the int16 scale of each lane vpmaddubsw makes of them.
struct Group {
  __m256i lo, hi, s_lo, s_hi;
};

// The 8 scales (bytes 0-7) and 8 mins (bytes 8-15) of a Q4_K / Q5_K block
// from their 12 packed bytes at p (the 64-bit integer form of
// ScalesMinsK4, in a dozen fewer instructions), for the prompt panels' fill
// (the decode rows: ScalesMinsK4Shuffled below). p[0..3] = a, p[4..7] = b,
// p[8..11] = c; the 4 bytes read past them are the block's quants (unused).
inline __m128i ScalesMinsK4Vector(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i low = _mm_and_si128(v, _mm_set1_epi8(0x3f));  // a & 0x3f.., b & 0x3f..
  const __m128i c = _mm_shuffle_epi32(v, 0xAA);
  const __m128i c_nibbles = _mm_and_si128(_mm_srlv_epi32(c, _mm_setr_epi32(0, 4, 0, 0)), _mm_set1_epi8(0x0f));
  const __m128i top = _mm_and_si128(_mm_srli_epi32(v, 2), _mm_set1_epi8(0x30));  // (a >> 2), (b >> 2) & 0x30..
  return _mm_unpacklo_epi32(low, _mm_or_si128(c_nibbles, top));
}

// ScalesMinsK4Vector in six vector uops instead of eight, for the decode
// rows (HeaderK4): dwords a, c, b, c first, then the low six bits of a and
// b, the nibbles of c, and bits 6-7 of a and b moved up under c's (a 64-bit
// shift by 30 puts a >> 2 in the dword of c). Single-token Q4_K rows gain
// 3%; the prompt panels' fill, eight rows at a time, lost 5% with it
// (bench/quant_dot --tokens 1,8,16), so they keep the form above.
inline __m128i ScalesMinsK4Shuffled(const uint8_t* p) {
  const __m128i v = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)),
                                     _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
  const __m128i low = _mm_and_si128(_mm_srlv_epi32(v, _mm_setr_epi32(0, 0, 0, 4)),
                                    _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i top = _mm_and_si128(_mm_slli_epi64(v, 30), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(low, top);
}

// scales[0] holds the 16 bytes of ScalesMinsK4Shuffled in both 128-bit lanes:
// a vpshufb picks scale j (zero-extended to int16) into every int16 lane,
// and the mins, each twice (both groups of 16 of its 32 elements).
inline void HeaderK4(const uint8_t* b, Header* h) {
  // d and dmin in one conversion: a vector uop fewer per block.
  const __m128 d_dmin = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(Load32(b))));
  h->d = _mm_cvtss_f32(d_dmin);
  h->dmin = _mm_cvtss_f32(_mm_movehdup_ps(d_dmin));
  const __m256i sm = _mm256_broadcastsi128_si256(ScalesMinsK4Shuffled(b + 4));
  h->scales[0] = sm;
  constexpr char z = static_cast<char>(0x80);  // vpshufb: a zero byte
  h->mins = _mm256_shuffle_epi8(sm, _mm256_setr_epi8(8, z, 8, z, 9, z, 9, z, 10, z, 10, z, 11, z, 11, z,  //
                                                     12, z, 12, z, 13, z, 13, z, 14, z, 14, z, 15, z, 15, z));
}

// Scale j (0-7) of a K4 header in every int16 lane; j a constant once the
// callers' loops are unrolled.
CAIRN_KQUANT_INLINE __m256i ScaleK4(const Header& h, int j) {
  return _mm256_shuffle_epi8(h.scales[0], _mm256_set1_epi16(static_cast<int16_t>(0x8000 | j)));
}

// Per type, for the panels: kGroupShift = log2(elements per scale), and
// kInt16Chunks = how many 4-element chunks' vpmaddubsw pairs add up in
// int16 before the widening: a pair is at most 2 x 127 x the largest quant
// (15 for Q4_K, 31 Q5_K, 63 Q6_K), so eight (30 480), four (31 496) or two
// (32 004) stay below 2^15.
struct Q4_K {
  static constexpr int kQuantBits = 4, kGroupShift = 5, kInt16Chunks = 8;
  static constexpr size_t kBlockBytes = 144;
  static void Head(const uint8_t* b, Header* h) { HeaderK4(b, h); }
  static void Unpack(const uint8_t* b, const Header& h, int g, Group* out) {
    const __m256i v = Load256(b + 16 + 32 * g);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    out->lo = _mm256_and_si256(v, low4);
    out->hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
    out->s_lo = ScaleK4(h, 2 * g);
    out->s_hi = ScaleK4(h, 2 * g + 1);
  }
};

struct Q5_K {
  static constexpr int kQuantBits = 5, kGroupShift = 5, kInt16Chunks = 4;
  static constexpr size_t kBlockBytes = 176;
  static void Head(const uint8_t* b, Header* h) { HeaderK4(b, h); }
  static void Unpack(const uint8_t* b, const Header& h, int g, Group* out) {
    Q4_K::Unpack(b + 32, h, g, out);  // same nibbles, 32 bytes further on
    // Bit 2g of qh[l] is bit 4 of element 64g + l, bit 2g + 1 that of 64g + 32 + l.
    const __m256i qh = Load256(b + 16);
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    const int lo_shift = 4 - 2 * g, hi_shift = 3 - 2 * g;
    const __m256i lo = lo_shift >= 0 ? _mm256_slli_epi16(qh, lo_shift) : _mm256_srli_epi16(qh, -lo_shift);
    const __m256i hi = hi_shift >= 0 ? _mm256_slli_epi16(qh, hi_shift) : _mm256_srli_epi16(qh, -hi_shift);
    out->lo = _mm256_or_si256(out->lo, _mm256_and_si256(lo, bit4));
    out->hi = _mm256_or_si256(out->hi, _mm256_and_si256(hi, bit4));
  }
};

// Q6_K: quants u - 32 with u in [0, 63]; the offset becomes a min of
// 32 * scale per group at the block scale.
struct Q6_K {
  static constexpr int kQuantBits = 6, kGroupShift = 4, kInt16Chunks = 2;
  static constexpr size_t kBlockBytes = 210;
  static void Head(const uint8_t* b, Header* h) {
    h->d = Half(b + 208);
    h->dmin = h->d;
    // scales[i]: int16 scales 8i..8i+7 in both 128-bit lanes.
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
    h->scales[0] = _mm256_permute2x128_si256(s16, s16, 0x00);
    h->scales[1] = _mm256_permute2x128_si256(s16, s16, 0x11);
    h->mins = _mm256_slli_epi16(s16, 5);
  }
  // Int16 scale k of `scales` in the low 128-bit lane, k + 1 in the high.
  static __m256i ScalePair(__m256i scales, int k) {
    const int lo = (2 * k + 1) << 8 | 2 * k, hi = (2 * k + 3) << 8 | (2 * k + 2);
    return _mm256_shuffle_epi8(
        scales, _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>(lo)), _mm_set1_epi16(static_cast<int16_t>(hi))));
  }
  static void Unpack(const uint8_t* b, const Header& h, int g, Group* out) {
    // Half g / 2 of the block: ql[0..63] low nibbles are its elements 0..63,
    // high nibbles 64..127; qh[l] bits 4-5 of elements l, l+32, l+64, l+96.
    const int half = g / 2, upper = g % 2;
    const uint8_t* ql = b + 64 * half;
    const __m256i qh = Load256(b + 128 + 32 * half);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    __m256i l0 = Load256(ql), l1 = Load256(ql + 32);
    __m256i h0, h1;
    if (upper) {
      l0 = _mm256_srli_epi16(l0, 4);
      l1 = _mm256_srli_epi16(l1, 4);
      h0 = qh;
      h1 = _mm256_srli_epi16(qh, 2);
    } else {
      h0 = _mm256_slli_epi16(qh, 4);
      h1 = _mm256_slli_epi16(qh, 2);
    }
    out->lo = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(h0, bits45));
    out->hi = _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(h1, bits45));
    // Groups of 16: 4g .. 4g + 3; each vector's 128-bit lanes take two.
    out->s_lo = ScalePair(h.scales[half], 4 * upper);
    out->s_hi = ScalePair(h.scales[half], 4 * upper + 2);
  }
};

// Eight floats to eight int32, clamped to [-127, 127] (NaN -> 127) and
// rounded to nearest even, as the portable quantizer does.
inline __m256i Round8(const float* x, __m256 id) {
  __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), id);
  v = _mm256_max_ps(_mm256_min_ps(v, _mm256_set1_ps(127.0f)), _mm256_set1_ps(-127.0f));
  return _mm256_cvtps_epi32(v);
}

void QuantizeQ8K(const float* x, int64_t n, uint8_t* qx) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / kQ8KBlockElems; ++b, x += kQ8KBlockElems, qx += kQ8KBlockBytes) {
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < kQ8KBlockElems; i += 8)
      amax = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), amax);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float m = _mm_cvtss_f32(m4);
    const float d = m / 127.0f;
    const __m256 id = _mm256_set1_ps(m > 0 ? 127.0f / m : 0.0f);
    int16_t sums[16];
    for (int g = 0; g < 16; g += 2) {
      // 32 elements: packs interleave 128-bit lanes, vpermq restores order.
      const __m256i a =
          _mm256_permute4x64_epi64(_mm256_packs_epi32(Round8(x + 16 * g, id), Round8(x + 16 * g + 8, id)), 0xD8);
      const __m256i c =
          _mm256_permute4x64_epi64(_mm256_packs_epi32(Round8(x + 16 * g + 16, id), Round8(x + 16 * g + 24, id)), 0xD8);
      const __m256i q8 = _mm256_permute4x64_epi64(_mm256_packs_epi16(a, c), 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qx + 4 + 16 * g), q8);
      // Sums of 16: vpmaddwd by ones, then two horizontal adds.
      const __m256i ones = _mm256_set1_epi16(1);
      const __m256i pa = _mm256_madd_epi16(a, ones), pc = _mm256_madd_epi16(c, ones);
      const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(pa, pc), _mm256_setzero_si256());
      // s: lanes 0, 1 sum a[0..7], c[0..7]; lanes 4, 5 sum a[8..15], c[8..15].
      alignas(32) int32_t part[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(part), s);
      sums[g] = static_cast<int16_t>(part[0] + part[4]);
      sums[g + 1] = static_cast<int16_t>(part[1] + part[5]);
    }
    std::memcpy(qx, &d, 4);
    std::memcpy(qx + 4 + kQ8KBlockElems, sums, sizeof sums);
  }
}

// How far ahead of its reads RowTokens prefetches the weights: decode steps
// (one token) wait on them. bench/quant_dot --tokens 1 (4096 x 4096 from
// memory, CPU time, 3-4 alternated runs), GFLOP/s at 1 / 2 / 4 / 8 KiB:
// Q4_K 45.8 / 47.5 / 48.7 / 47.4, Q5_K 38.0 / 38.4 / 40.4 / 39.9, Q6_K
// 32.4 / 34.8 / 36.8 / 36.2.
constexpr size_t kRowPrefetchBytes = 4096;

// The integer products of weight block b of `row` with block b of kTokens
// activation rows: isum[t] and mins[t] (8 int32 lanes each, summed exactly
// later) and the block's scales d * dx, dmin * dx per token.
template <class K, int kTokens>
CAIRN_KQUANT_INLINE void BlockProducts(const uint8_t* row, const uint8_t* qx, size_t qx_stride, int64_t b,
                                       __m256i* isum, __m256i* mins, float* d_dx, float* dmin_dx) {
  const uint8_t* wb = row + b * K::kBlockBytes;
  // The block kRowPrefetchBytes ahead, a line at a time (rows follow each
  // other, so past the row's end this is the next row's start; past the
  // matrix's end a prefetch never faults).
#pragma GCC unroll 4
  for (size_t line = 0; line < K::kBlockBytes; line += 64) __builtin_prefetch(wb + kRowPrefetchBytes + line);
  Header h;
  K::Head(wb, &h);
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    Group grp;
    K::Unpack(wb, h, g, &grp);
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      const uint8_t* xq = qx + t * qx_stride + b * kQ8KBlockBytes + 4 + 64 * g;
      const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(grp.lo, Load256(xq)), grp.s_lo);
      const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(grp.hi, Load256(xq + 32)), grp.s_hi);
      isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(p_lo, p_hi));
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) {
    const uint8_t* xb = qx + t * qx_stride + b * kQ8KBlockBytes;
    mins[t] = _mm256_madd_epi16(h.mins, Load256(xb + 4 + kQ8KBlockElems));
    float dx;
    std::memcpy(&dx, xb, 4);
    d_dx[t] = h.d * dx;
    dmin_dx[t] = h.dmin * dx;
  }
}

// AccumulateBlock for four blocks (or four tokens: `sequential` false) at
// once: `both` holds their four integer dots then their four mins; one
// horizontal pass sums all eight. Sequential: the four blocks of one token,
// added to acc[0] in order; otherwise acc[t] of token t.
template <bool kSequential>
CAIRN_KQUANT_INLINE void AccumulateFour(const __m256i* both, const float* d_dx, const float* dmin_dx, float* acc) {
  const __m256 s = _mm256_cvtepi32_ps(SumEach(both));
  const __m128 dot = _mm_mul_ps(_mm256_castps256_ps128(s), _mm_loadu_ps(d_dx));
  const __m128 mins = _mm_mul_ps(_mm256_extractf128_ps(s, 1), _mm_loadu_ps(dmin_dx));
  if constexpr (kSequential) {
    alignas(16) float p[4], q[4];
    _mm_store_ps(p, dot);
    _mm_store_ps(q, mins);
    float a = acc[0];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) a = (a + p[i]) - q[i];
    acc[0] = a;
  } else {
    _mm_storeu_ps(acc, _mm_sub_ps(_mm_add_ps(_mm_loadu_ps(acc), dot), mins));
  }
}

// y[t * ldy] = row . X[t] for kTokens tokens; each block's integer products
// are summed exactly, then accumulated as AccumulateBlock does. One token
// (decode) sums four blocks' products in one horizontal pass, four tokens
// one block's.
template <class K, int kTokens>
void RowTokens(const uint8_t* row, const uint8_t* qx, size_t qx_stride, int64_t nb, float* y, int64_t ldy) {
  float acc[kTokens] = {};
  int64_t b = 0;
  if constexpr (kTokens == 1) {
    for (; b + 4 <= nb; b += 4) {
      __m256i both[8];  // the four blocks' dots, then their mins
      alignas(16) float d_dx[4], dmin_dx[4];
      // Unrolled, since the scales are one vector a block: 0-4% faster than
      // a block at a time (single-token rows in cache), though GCC still
      // parks some products on the stack.
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        BlockProducts<K, 1>(row, qx, qx_stride, b + i, &both[i], &both[4 + i], &d_dx[i], &dmin_dx[i]);
      }
      AccumulateFour<true>(both, d_dx, dmin_dx, acc);
    }
  }
  for (; b < nb; ++b) {
    __m256i isum[kTokens], mins[kTokens];
    alignas(16) float d_dx[kTokens], dmin_dx[kTokens];
    BlockProducts<K, kTokens>(row, qx, qx_stride, b, isum, mins, d_dx, dmin_dx);
    if constexpr (kTokens == 4) {
      const __m256i both[8] = {isum[0], isum[1], isum[2], isum[3], mins[0], mins[1], mins[2], mins[3]};
      AccumulateFour<false>(both, d_dx, dmin_dx, acc);
    } else {
#pragma GCC unroll 2
      for (int t = 0; t < kTokens; ++t) {
        acc[t] = AccumulateBlock(acc[t], ReduceAdd(isum[t]), ReduceAdd(mins[t]), d_dx[t], dmin_dx[t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) y[t * ldy] = acc[t];
}

// ---------------------------------------------------------------- prompts
// With 5 tokens or more, 8 rows go together as a panel whose blocks are
// re-laid out once (per tile of tokens) so that a 32-bit lane is a row:
// q[c][r] holds elements 4c..4c+3 of row r. vpmaddubsw with four activation
// bytes broadcast, two (Q6_K), four (Q5_K) or eight (Q4_K) added in int16,
// then one vpmaddwd by the group's paired scales give 8 rows' scaled sums
// in int32 lanes, with no horizontal sums; each lane then follows
// AccumulateBlock. Per token, panels cost about 0.55 of the row tiles'
// multiplies; their fill (FillPanel, per 8 rows and block) pays from 5
// tokens. bench/quant_dot --tokens (5632 x 2048 matrices from memory, one
// thread's CPU time), GFLOP/s, panels vs row tiles alone: Q4_K 5: 91 vs
// 81, 6: 95 vs 74-79, 8: 106 vs 91-94, 16: 123 vs 89-91; Q6_K 6: 81 vs
// 70-72, 8: 88 vs 84-86, 16: 103 vs 84. Row tiles are at their best on 4
// tokens (Q4_K 78, Q6_K 74), so 1-4 tokens stay rows (3: a 3-token tile).

// The 16 bytes of each of 8 rows as 8 vectors of 2 byte columns:
// out[k] holds bytes 2k (low 8 bytes, rows 0-7) and 2k + 1 (high 8 bytes).
CAIRN_KQUANT_INLINE void TransposeBytes8x16(const __m128i* rows, __m128i* out) {
  __m128i a[8], b[8];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {  // rows 2k, 2k+1 interleaved: bytes 0-7 | 8-15
    a[2 * k] = _mm_unpacklo_epi8(rows[2 * k], rows[2 * k + 1]);
    a[2 * k + 1] = _mm_unpackhi_epi8(rows[2 * k], rows[2 * k + 1]);
  }
#pragma GCC unroll 2
  for (int k = 0; k < 2; ++k) {  // rows 4k..4k+3: bytes 0-3, 4-7, 8-11, 12-15
    b[4 * k] = _mm_unpacklo_epi16(a[4 * k], a[4 * k + 2]);
    b[4 * k + 1] = _mm_unpackhi_epi16(a[4 * k], a[4 * k + 2]);
    b[4 * k + 2] = _mm_unpacklo_epi16(a[4 * k + 1], a[4 * k + 3]);
    b[4 * k + 3] = _mm_unpackhi_epi16(a[4 * k + 1], a[4 * k + 3]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {  // bytes 4j..4j+3 of rows 0-3 then 4-7
    out[2 * j] = _mm_unpacklo_epi32(b[j], b[4 + j]);
    out[2 * j + 1] = _mm_unpackhi_epi32(b[j], b[4 + j]);
  }
}

// Bytes 0-7 of v, zero- (Q4_K, Q5_K) or sign-extended (Q6_K) to int16,
// each in both int16 halves of an int32 lane.
CAIRN_KQUANT_INLINE __m256i PairedBytes(__m128i v, bool is_signed) {
  const __m256i w = is_signed ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v);
  return _mm256_or_si256(_mm256_and_si256(w, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(w, 16));
}

// The scales, mins and block scales of a panel block (PanelBlock), 8 rows
// at once: the rows' 16 scale (and min) bytes transposed so that a byte
// column holds one group's over the rows.
template <class K>
CAIRN_KQUANT_INLINE void FillPanelScales(const uint8_t* const* blk, PanelBlock* pb) {
  __m128i rows[kPanelRows], col[8];
  constexpr bool kQ6 = K::kGroupShift == 4;
#pragma GCC unroll 8
  for (int r = 0; r < kPanelRows; ++r) {
    rows[r] = kQ6 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[r] + 192)) : ScalesMinsK4Vector(blk[r] + 4);
    pb->d[r] = kQ6 ? Half(blk[r] + 208) : Half(blk[r]);
    pb->dmin[r] = kQ6 ? pb->d[r] : Half(blk[r] + 2);
  }
  TransposeBytes8x16(rows, col);
  if constexpr (kQ6) {
    // 16 int8 scales; min_pair[k]: int16 32 * scale 2k, 32 * scale 2k + 1.
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m128i next = _mm_srli_si128(col[k], 8);
      Store256(pb->scale_pair[2 * k], PairedBytes(col[k], true));
      Store256(pb->scale_pair[2 * k + 1], PairedBytes(next, true));
      const __m128i m = _mm_slli_epi16(_mm_cvtepi8_epi16(col[k]), 5),
                    m_next = _mm_slli_epi16(_mm_cvtepi8_epi16(next), 5);
      Store256(pb->min_pair[k], _mm256_setr_m128i(_mm_unpacklo_epi16(m, m_next), _mm_unpackhi_epi16(m, m_next)));
    }
  } else {
    // 8 scales (columns 0-7) and 8 mins (8-15), a min for both groups of 16
    // of its 32 elements.
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      Store256(pb->scale_pair[2 * k], PairedBytes(col[k], false));
      Store256(pb->scale_pair[2 * k + 1], PairedBytes(_mm_srli_si128(col[k], 8), false));
      Store256(pb->min_pair[2 * k], PairedBytes(col[4 + k], false));
      Store256(pb->min_pair[2 * k + 1], PairedBytes(_mm_srli_si128(col[4 + k], 8), false));
    }
  }
}

// The 32 bytes at blk[r] + offset of the 8 rows, transposed: v[j] holds
// bytes 4j..4j+3 of every row, a row per lane.
CAIRN_KQUANT_INLINE void TransposedRows(const uint8_t* const* blk, int offset, __m256i* v) {
#pragma GCC unroll 8
  for (int r = 0; r < kPanelRows; ++r) v[r] = Load256(blk[r] + offset);
  Transpose8x8(v);
}

// The quants of block b of the panel's 8 rows, re-laid out. The packed
// bytes are transposed first (a byte holds parts of two or four elements,
// so that is a half or a quarter of the shuffles of transposing unpacked
// elements), then unpacked in place: the same values the rows kernel's
// Unpack makes.
template <class K>
CAIRN_KQUANT_INLINE void FillPanelQuants(const uint8_t* const* blk, PanelBlock* pb) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  if constexpr (K::kQuantBits == 6) {
    // Half h: ql[64h + l] low nibbles are elements 128h + l (l < 64), high
    // nibbles 128h + 64 + l; qh[32h + l] bits 2i, 2i + 1 are bits 4, 5 of
    // element 128h + 32i + l.
    const __m256i bits45 = _mm256_set1_epi8(0x30);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i qh[kPanelRows];
      TransposedRows(blk, 128 + 32 * h, qh);
#pragma GCC unroll 2
      for (int part = 0; part < 2; ++part) {  // ql bytes 32 part .. 32 part + 31
        __m256i v[kPanelRows];
        TransposedRows(blk, 64 * h + 32 * part, v);
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) {
          const __m256i low =
              _mm256_or_si256(_mm256_and_si256(v[j], low4), _mm256_and_si256(Shift16(qh[j], 4 - 2 * part), bits45));
          const __m256i high = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v[j], 4), low4),
                                               _mm256_and_si256(Shift16(qh[j], -2 * part), bits45));
          Store256(pb->q[32 * h + 8 * part + j], low);
          Store256(pb->q[32 * h + 16 + 8 * part + j], high);
        }
      }
    }
  } else {
    // qs[32g + l]: low nibble element 64g + l, high nibble 64g + 32 + l;
    // Q5_K: bits 2g, 2g + 1 of qh[l] are bit 4 of those two.
    constexpr int kQs = K::kQuantBits == 5 ? 48 : 16;
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    __m256i qh[kPanelRows];
    if constexpr (K::kQuantBits == 5) TransposedRows(blk, 16, qh);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      __m256i v[kPanelRows];
      TransposedRows(blk, kQs + 32 * g, v);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) {
        __m256i low = _mm256_and_si256(v[j], low4), high = _mm256_and_si256(_mm256_srli_epi16(v[j], 4), low4);
        if constexpr (K::kQuantBits == 5) {
          low = _mm256_or_si256(low, _mm256_and_si256(Shift16(qh[j], 4 - 2 * g), bit4));
          high = _mm256_or_si256(high, _mm256_and_si256(Shift16(qh[j], 3 - 2 * g), bit4));
        }
        Store256(pb->q[16 * g + j], low);
        Store256(pb->q[16 * g + 8 + j], high);
      }
    }
  }
}

constexpr size_t kPanelPrefetchBlocks = 4;

// Block b of the panel's 8 rows re-laid out (PanelBlock).
template <class K>
void FillPanel(const uint8_t* w, size_t w_stride, int64_t b, int64_t nb, PanelBlock* pb) {
  const uint8_t* blk[kPanelRows];
  // Each row's block kPanelPrefetchBlocks ahead, and past the row's end
  // the same row of the next panel: with few tokens the fills wait on
  // memory otherwise (the next panel's first blocks most: rows of a few
  // blocks are short streams the hardware prefetcher catches late). Past
  // the matrix's end a prefetch never faults.
  const int64_t ahead = b + static_cast<int64_t>(kPanelPrefetchBlocks);
  const uint8_t* next =
      ahead < nb ? w + ahead * K::kBlockBytes : w + kPanelRows * w_stride + (ahead - nb) * K::kBlockBytes;
#pragma GCC unroll 8
  for (int r = 0; r < kPanelRows; ++r) {
    blk[r] = w + r * w_stride + b * K::kBlockBytes;
#pragma GCC unroll 4
    for (size_t line = 0; line < K::kBlockBytes; line += 64) __builtin_prefetch(next + r * w_stride + line);
  }
  FillPanelScales<K>(blk, pb);
  FillPanelQuants<K>(blk, pb);
}

// Panels of 8 rows (5 tokens or more), the rows left over (and fewer
// tokens) as below. Tokens go in tiles whose activations stay in L2 while
// every row passes over them; within a tile, each row's blocks are unpacked
// once per 4 tokens (or 3).
template <class K>
void DotK(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
          int64_t n, float* y, int64_t ldy) {
  const int64_t nb = n / kQ8KBlockElems;
  TakePanelRows(
      kPanelRows, kPanelMinTokens, n_tokens,
      [&](int64_t rows) {
        PanelDot<K>(rows, qx, qx_stride, n_tokens, n, y, ldy, [&](int64_t r0, int64_t b, PanelBlock* pb) {
          FillPanel<K>(w + r0 * w_stride, w_stride, b, nb, pb);
        });
      },
      &w, w_stride, &n_rows, &y);
  const int64_t tile = Max(4, static_cast<int64_t>((256 << 10) / Q8KRowBytes(n)) / 4 * 4);
  for (int64_t t0 = 0; t0 < n_tokens; t0 += tile) {
    const int64_t t1 = Min(n_tokens, t0 + tile);
    for (int64_t r = 0; r < n_rows; ++r) {
      const uint8_t* row = w + r * w_stride;
      int64_t t = t0;
      for (; t + 4 <= t1; t += 4) RowTokens<K, 4>(row, qx + t * qx_stride, qx_stride, nb, y + t * ldy + r, ldy);
      if (t + 3 == t1) {
        RowTokens<K, 3>(row, qx + t * qx_stride, qx_stride, nb, y + t * ldy + r, ldy);
        t += 3;
      }
      if (t + 2 <= t1) {
        RowTokens<K, 2>(row, qx + t * qx_stride, qx_stride, nb, y + t * ldy + r, ldy);
        t += 2;
      }
      if (t < t1) RowTokens<K, 1>(row, qx + t * qx_stride, qx_stride, nb, y + t * ldy + r, ldy);
    }
  }
}

}  // namespace

// Every type packs its rows at load (quant_dot_kquant_packed_avx2.cc).
constinit const QuantDotKernel kQ4_KAvx2 = {
    GgmlType::kQ4_K, "avx2", kQ8KBlockElems, Q8KRowBytes,       QuantizeQ8K,
    DotK<Q4_K>,      true,   kPanelRows,     PackKQuantAvx2Q4K, PackedDotKQuantAvx2Q4K};
constinit const QuantDotKernel kQ5_KAvx2 = {
    GgmlType::kQ5_K, "avx2", kQ8KBlockElems, Q8KRowBytes,       QuantizeQ8K,
    DotK<Q5_K>,      true,   kPanelRows,     PackKQuantAvx2Q5K, PackedDotKQuantAvx2Q5K};
constinit const QuantDotKernel kQ6_KAvx2 = {
    GgmlType::kQ6_K, "avx2", kQ8KBlockElems, Q8KRowBytes,       QuantizeQ8K,
    DotK<Q6_K>,      true,   kPanelRows,     PackKQuantAvx2Q6K, PackedDotKQuantAvx2Q6K};

}  // namespace cairn
