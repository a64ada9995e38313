// Q8_0 and Q4_0 weights times q8_0 activations with AVX-512 VNNI (vpdpbusd).
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx2 -mfma
// -mf16c whatever the build's -march; quant_dot.cc calls it only on CPUs
// that have them. Nothing here may be shared with other files (see
// quant_dot_internal.h): no std templates, helpers in an anonymous namespace.
//
// A 512-bit register holds two 32-element blocks. vpdpbusd multiplies
// unsigned by signed bytes and adds groups of four into 16 int32 lanes, 8 per
// block; the lanes are converted to float and scaled by their block's
// (weight scale x activation scale) before they meet lanes of other blocks.
// - Q4_0: the nibbles (value + 8) are the unsigned operand as they are; the
//   lanes start at -sum(q) of their block (8 lanes: -8 * sum in all).
// - Q8_0: the weights are made unsigned (q + 128, by flipping the sign bit);
//   each lane starts at -128 * the sum of its 4 activations, computed once
//   per activation row and pair of blocks for all the weight rows. (Making
//   the activations unsigned instead needs the weights' sums: a second
//   vpdpbusd per weight row, which held decode at 0.93x llama.cpp.)
#include <immintrin.h>

#include <cstring>
#include <new>

#include "backends/kernels/quant_dot_internal.h"

namespace cairn {
namespace {

// The F16 scales at a and b (b null: 0) as [a x 8, b x 8]: both converted
// in one instruction, spread by one permute.
__attribute__((always_inline)) inline __m512 PairScaleF16(const uint8_t* a, const uint8_t* b) {
  uint16_t ha, hb = 0;
  std::memcpy(&ha, a, 2);
  if (b != nullptr) std::memcpy(&hb, b, 2);
  const __m128 both = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(ha | (static_cast<uint32_t>(hb) << 16))));
  return _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                               _mm512_castps128_ps512(both));
}

// One activation row's operands for a pair of blocks (or one block, the
// second half zero, when `half`).
struct ActPair {
  __m512i q;        // the 64 quants
  __m512 d;         // scales per lane
  __m512i neg_sum;  // the lanes' start values (W::LaneStart)
};

struct Q4_0 {
  static constexpr int64_t kBlockBytes = kQ4_0BlockBytes;
  // Nibbles of blocks b, b+1 as 64 unsigned bytes in element order.
  __attribute__((always_inline)) static inline __m512i Quants(const uint8_t* blk, bool half) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m128i hi =
        half ? _mm_setzero_si128() : _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + kBlockBytes + 2));
    // [lo, lo, hi, hi], then the odd 128-bit lanes shifted down a nibble.
    const __m512i both = _mm512_castsi256_si512(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
    const __m512i dup = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0), both);
    const __m512i shifted = _mm512_srlv_epi16(dup, _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0,
                                                                    0x0004000400040004, 0x0004000400040004, 0, 0));
    return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0F));
  }
  // Each lane starts at -(its block's activation sum): 8 lanes, the 8 of
  // the offset.
  __attribute__((always_inline)) static inline __m512i LaneStart(__m512i, const Q8ActivationRow& a, int64_t b,
                                                                 __mmask8 m2) {
    const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i s = _mm512_permutexvar_epi32(idx, _mm512_castsi128_si512(_mm_maskz_loadu_epi32(m2, a.sum + b)));
    return _mm512_sub_epi32(_mm512_setzero_si512(), s);
  }
};

struct Q8_0 {
  static constexpr int64_t kBlockBytes = kQ8_0BlockBytes;
  // The quants of blocks b, b+1 made unsigned (value + 128, the sign bit
  // flipped).
  __attribute__((always_inline)) static inline __m512i Quants(const uint8_t* blk, bool half) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
    const __m256i hi = half ? _mm256_set1_epi8(static_cast<char>(0x80))
                            : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kBlockBytes + 2));
    return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1),
                            _mm512_set1_epi8(static_cast<char>(0x80)));
  }
  // Each lane starts at -128 * the sum of its own 4 activations, so that it
  // holds its 4 products exactly (no large offsets cancelling in float).
  __attribute__((always_inline)) static inline __m512i LaneStart(__m512i q, const Q8ActivationRow&, int64_t, __mmask8) {
    return _mm512_sub_epi32(_mm512_setzero_si512(),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(static_cast<char>(0x80)), q));
  }
};

template <class W>
__attribute__((always_inline)) inline ActPair LoadAct(const Q8ActivationRow& a, int64_t b, bool half) {
  const __mmask8 m2 = half ? 0x1 : 0x3;
  const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  ActPair p;
  const __m512i q = half ? _mm512_maskz_loadu_epi8(0xFFFFFFFFull, a.q + b * kQ8BlockElems)
                         : _mm512_loadu_si512(a.q + b * kQ8BlockElems);
  p.q = q;
  p.d = _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(_mm_maskz_loadu_ps(m2, a.d + b)));
  p.neg_sum = W::LaneStart(q, a, b, m2);
  return p;
}

// One pair of blocks (or, kHalf, the last odd block) of R weight rows x T
// activation rows into the accumulators. Inlined with kHalf constant, so the
// main loop has no branches.
template <class W, int R, int T, bool kHalf>
__attribute__((always_inline)) inline void Step(const uint8_t* const* rows, const Q8ActivationRow* act, int64_t b,
                                                __m512 (&acc)[R][T]) {
  __m512i wq[R];
  __m512 wd[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const uint8_t* blk = rows[r] + b * W::kBlockBytes;
    wq[r] = W::Quants(blk, kHalf);
    wd[r] = PairScaleF16(blk, kHalf ? nullptr : blk + W::kBlockBytes);
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const ActPair a = LoadAct<W>(act[t], b, kHalf);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512i dp = _mm512_dpbusd_epi32(a.neg_sum, wq[r], a.q);
      acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), _mm512_mul_ps(wd[r], a.d), acc[r][t]);
    }
  }
}

// R weight rows x T activation rows, all blocks; out[r * T + t].
template <class W, int R, int T>
void Tile(const uint8_t* const* rows, const Q8ActivationRow* act, int64_t nb, float* out) {
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) Step<W, R, T, false>(rows, act, b, acc);
  if (b < nb) Step<W, R, T, true>(rows, act, b, acc);
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) out[r * T + t] = _mm512_reduce_add_ps(acc[r][t]);
}

template <class W, int R, int T>
void TileInto(const uint8_t* w, size_t w_stride, int64_t r0, const Q8ActivationRow* act, int64_t t0, int64_t nb,
              float* y, int64_t ldy) {
  const uint8_t* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = w + (r0 + r) * w_stride;
  float out[R * T];
  Tile<W, R, T>(rows, act, nb, out);
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[(t0 + t) * ldy + r0 + r] = out[r * T + t];
}

using TileFn = void (*)(const uint8_t*, size_t, int64_t, const Q8ActivationRow*, int64_t, int64_t, float*, int64_t);

// Register blocks: 4 rows x 4 tokens (prompts), 4 rows x 1 token (decode:
// the four rows are adjacent, so the weights still stream in order), and
// every smaller shape for the tails.
constexpr int kRows = 4;
constexpr int kTokens = 4;

template <class W>
struct Tiles {
  static constexpr TileFn kFns[kRows][kTokens] = {
      {&TileInto<W, 1, 1>, &TileInto<W, 1, 2>, &TileInto<W, 1, 3>, &TileInto<W, 1, 4>},
      {&TileInto<W, 2, 1>, &TileInto<W, 2, 2>, &TileInto<W, 2, 3>, &TileInto<W, 2, 4>},
      {&TileInto<W, 3, 1>, &TileInto<W, 3, 2>, &TileInto<W, 3, 3>, &TileInto<W, 3, 4>},
      {&TileInto<W, 4, 1>, &TileInto<W, 4, 2>, &TileInto<W, 4, 3>, &TileInto<W, 4, 4>},
  };
};

// ---------------------------------------------------------------- prompts
// Many tokens: 16 weight rows at a time are first repacked (per thread, once
// for all the tokens of the call) so that lane r of a register holds row r:
// per block, 8 registers of 4 consecutive unsigned quants of each of the 16
// rows (Q4_0: the nibbles; Q8_0: value + 128), then the 16 row scales. A
// token's 4 quants broadcast to every lane (an embedded-broadcast operand of
// vpdpbusd), so after 8 vpdpbusd each lane holds its row's whole block dot
// and the float scaling runs once per 16 rows instead of once per row: about
// 11 vector operations per 512 multiply-adds instead of about 60.
constexpr int kPackRows = 16;
constexpr int kPackTokens = 8;
constexpr int64_t kPackBlockBytes = 8 * 64 + 64;  // quants, then scales

struct Q4_0Pack {
  static constexpr int64_t kBlockBytes = kQ4_0BlockBytes;
  static constexpr int32_t kOffset = 8;  // stored value = quant + 8
  // The 8 chunks (elements 4k..4k+3, lane = row) of one block of 16 rows.
  static inline void Chunks(const uint8_t* blk0, __m512i row_offsets, __m512i* out) {
    const __m512i low = _mm512_set1_epi8(0x0F);
    for (int k = 0; k < 4; ++k) {
      const __m512i g = _mm512_i32gather_epi32(row_offsets, blk0 + 2 + 4 * k, 1);
      out[k] = _mm512_and_si512(g, low);                            // elements 4k..4k+3
      out[k + 4] = _mm512_and_si512(_mm512_srli_epi32(g, 4), low);  // elements 16+4k..
    }
  }
};

struct Q8_0Pack {
  static constexpr int64_t kBlockBytes = kQ8_0BlockBytes;
  static constexpr int32_t kOffset = 128;  // stored value = quant + 128
  static inline void Chunks(const uint8_t* blk0, __m512i row_offsets, __m512i* out) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int k = 0; k < 8; ++k) {
      out[k] = _mm512_xor_si512(_mm512_i32gather_epi32(row_offsets, blk0 + 2 + 4 * k, 1), flip);
    }
  }
};

template <class P>
void PackRows(const uint8_t* w, size_t w_stride, int64_t nb, uint8_t* pack) {
  const __m512i row_offsets = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                                 _mm512_set1_epi32(static_cast<int32_t>(w_stride)));
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk0 = w + b * P::kBlockBytes;
    __m512i chunks[8];
    P::Chunks(blk0, row_offsets, chunks);
    uint8_t* dst = pack + b * kPackBlockBytes;
    for (int k = 0; k < 8; ++k) _mm512_store_si512(dst + 64 * k, chunks[k]);
    // The F16 scale is the low half of the dword at the block's start.
    const __m512i d = _mm512_i32gather_epi32(row_offsets, blk0, 1);
    _mm512_store_ps(dst + 512, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(d)));
  }
}

// y[(t0 + t) * ldy + r] for the 16 packed rows and T tokens.
template <class P, int T>
void PackedTile(const uint8_t* pack, int64_t nb, const Q8ActivationRow* act, float* y, int64_t ldy) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = pack + b * kPackBlockBytes;
    __m512i wq[8];
    for (int k = 0; k < 8; ++k) wq[k] = _mm512_load_si512(blk + 64 * k);
    const __m512 wd = _mm512_load_ps(blk + 512);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const int8_t* q = act[t].q + b * kQ8BlockElems;
      __m512i dot = _mm512_set1_epi32(-P::kOffset * act[t].sum[b]);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        int32_t four;
        std::memcpy(&four, q + 4 * k, 4);
        dot = _mm512_dpbusd_epi32(dot, wq[k], _mm512_set1_epi32(four));
      }
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(wd, _mm512_set1_ps(act[t].d[b])), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(y + t * ldy, acc[t]);
}

template <class P>
struct PackedTiles {
  static constexpr void (*kFns[kPackTokens])(const uint8_t*, int64_t, const Q8ActivationRow*, float*, int64_t) = {
      &PackedTile<P, 1>, &PackedTile<P, 2>, &PackedTile<P, 3>, &PackedTile<P, 4>,
      &PackedTile<P, 5>, &PackedTile<P, 6>, &PackedTile<P, 7>, &PackedTile<P, 8>};
};

// A per-thread buffer for the packed rows (no std containers in this file:
// see quant_dot_internal.h).
struct PackBuffer {
  uint8_t* data = nullptr;
  size_t bytes = 0;
  ~PackBuffer() { ::operator delete[](data, std::align_val_t{64}); }
  uint8_t* Get(size_t need) {
    if (need > bytes) {
      ::operator delete[](data, std::align_val_t{64});
      data = static_cast<uint8_t*>(::operator new[](need, std::align_val_t{64}));
      bytes = need;
    }
    return data;
  }
};

// Tokens from which packing pays: the pack costs about what one token's
// products cost.
constexpr int64_t kPackMinTokens = 8;

template <class P>
void PackedDot(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
               int64_t nb, float* y, int64_t ldy) {
  thread_local PackBuffer buffer;
  uint8_t* pack = buffer.Get(static_cast<size_t>(nb * kPackBlockBytes));
  for (int64_t r0 = 0; r0 + kPackRows <= n_rows; r0 += kPackRows) {
    PackRows<P>(w + r0 * w_stride, w_stride, nb, pack);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kPackTokens) {
      const int64_t nt = n_tokens - t0 < kPackTokens ? n_tokens - t0 : kPackTokens;
      Q8ActivationRow act[kPackTokens];
      for (int64_t t = 0; t < nt; ++t) act[t] = ViewQ8Activations(qx + (t0 + t) * qx_stride, nb);
      PackedTiles<P>::kFns[nt - 1](pack, nb, act, y + t0 * ldy + r0, ldy);
    }
  }
}

template <class W>
struct PackOf;
template <>
struct PackOf<Q4_0> {
  using type = Q4_0Pack;
};
template <>
struct PackOf<Q8_0> {
  using type = Q8_0Pack;
};

template <class W>
void Dot(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
         int64_t n, float* y, int64_t ldy) {
  const int64_t nb = n / kQ8BlockElems;
  int64_t packed_rows = 0;
  if (n_tokens >= kPackMinTokens && n_rows >= kPackRows) {
    PackedDot<typename PackOf<W>::type>(w, w_stride, n_rows, qx, qx_stride, n_tokens, nb, y, ldy);
    packed_rows = n_rows / kPackRows * kPackRows;
  }
  for (int64_t r0 = packed_rows; r0 < n_rows; r0 += kRows) {
    const int64_t nr = n_rows - r0 < kRows ? n_rows - r0 : kRows;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokens) {
      const int64_t nt = n_tokens - t0 < kTokens ? n_tokens - t0 : kTokens;
      Q8ActivationRow act[kTokens];
      for (int64_t t = 0; t < nt; ++t) act[t] = ViewQ8Activations(qx + (t0 + t) * qx_stride, nb);
      Tiles<W>::kFns[nr - 1][nt - 1](w, w_stride, r0, act, t0, nb, y, ldy);
    }
  }
}

}  // namespace

constinit const QuantDotKernel kQ8_0Avx512Vnni = {
    GgmlType::kQ8_0, "avx512vnni", kQ8BlockElems, &Q8ActivationRowBytes, &QuantizeQ8Activations, &Dot<Q8_0>, false};
constinit const QuantDotKernel kQ4_0Avx512Vnni = {
    GgmlType::kQ4_0, "avx512vnni", kQ8BlockElems, &Q8ActivationRowBytes, &QuantizeQ8Activations, &Dot<Q4_0>, false};

}  // namespace cairn
