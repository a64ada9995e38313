// Q8_0 and Q4_0 weights times q8_0 activations with AVX2 (vpmaddubsw).
// Compiled with -mavx2 -mfma -mf16c -mno-avx512f whatever the build's
// -march (so that it is a real AVX2 kernel even on an AVX-512 machine);
// quant_dot.cc calls it only on CPUs that have AVX2 and FMA. Nothing here may
// be shared with other files (see quant_dot_internal.h).
//
// Both kernels also pack (QuantDotKernel::pack, "packed weights" below): a
// matrix packed at load goes through PackedDot, 8 rows per group with a row
// per int32 lane, and never through the GGUF-row paths described next,
// which serve unpacked matrices and the rows past a matrix's last group.
//
// Decode steps (and the rows prompt panels leave over) take register tiles
// of 8 outputs: per block, the 8 exact integer dots in the 8 int32 lanes of
// one vector, converted to float and scaled by each block's (weight scale x
// activation scale), as the portable kernel does (see Tile). vpmaddubsw
// multiplies unsigned by signed bytes into 16-bit pairs:
// - Q8_0: |w| times q with w's sign moved onto q (127 x 127 x 2 < 2^15), a
//   vector per output, widened by vpmaddwd and summed by SumEach
//   (quant_dot_kquant_blocks.h).
// - Q4_0: the nibbles (value + 8) are the unsigned operand as they are, two
//   outputs per vector, summed in int16 (Q4_0::Dots); the dot then
//   subtracts 8 x the activations' sum.
// The tiles are bound by instructions issued, not by one port: every
// instruction a block saves shows in decode speed (see Q4_0::Dots, Tile).
#include <immintrin.h>

#include <cstring>

#include "backends/kernels/quant_dot_internal.h"
#include "backends/kernels/quant_dot_kquant_blocks.h"  // SumEach, Transpose8x8, Half

namespace cairn {
namespace {

// Each W gives Dots<R, T>: the exact integer dots of block b of R weight
// rows with block b of T activation rows, output r * T + t in int32 lane
// r * T + t (lanes from R * T on: anything).

struct Q4_0 {
  static constexpr int64_t kBlockBytes = kQ4_0BlockBytes;
  // The unsigned operand (nibbles in element order).
  static inline __m256i Unsigned(const uint8_t* blk) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
  }
  // The 32 weights as signed bytes in element order (nibble - 8).
  static inline __m256i SignedWeights(const uint8_t* blk) {
    return _mm256_sub_epi8(Unsigned(blk), _mm256_set1_epi8(8));
  }
  // Two outputs per vector, k in the low 128-bit half and k + 4 in the high
  // one: their two rows' 16 quant bytes side by side, whose low nibbles
  // (elements 0-15) meet activations 0-15 in both halves and high nibbles
  // (16-31) activations 16-31. The nibbles (value + 8) are the unsigned
  // operand as they are; a block's dot is then the products' sum minus 8 x
  // the activations' sum. Every int16 partial sum stays below 2^15 (a
  // vpmaddubsw pair is at most 2 x 15 x 127, and the reduction below adds
  // 8 of them before widening), so the four vectors reduce with int16 adds
  // and one vpmaddwd: per block of 8 outputs, 10 shuffles and 1 vpmaddwd
  // where a vector per output summed by SumEach takes 22 and 8.
  template <int R, int T>
  static inline __m256i Dots(const uint8_t* const* rows, int64_t b, const Q8ActivationRow* act) {
    static_assert(4 % T == 0, "outputs k and k + 4 must share a token");
    __m256i x_lo[T], x_hi[T];
    int32_t offset[8];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const int8_t* q = act[t].q + b * kQ8BlockElems;
      x_lo[t] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
      x_hi[t] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16)));
    }
#pragma GCC unroll 8
    for (int p = 0; p < 8; ++p) offset[p] = 8 * act[p % T].sum[b];
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256i pairs[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const int lo_row = k / T < R ? k / T : R - 1;  // rows past R: any row, the lane goes unused
      const int hi_row = (k + 4) / T < R ? (k + 4) / T : lo_row;
      const __m256i q = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(rows[hi_row] + b * kBlockBytes + 2),
                                            reinterpret_cast<const __m128i*>(rows[lo_row] + b * kBlockBytes + 2));
      const __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
      pairs[k] = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x_lo[k % T]), _mm256_maddubs_epi16(hi, x_hi[k % T]));
    }
    // Per half: outputs 0, 1 (4, 5) then 2, 3 (6, 7) interleaved and added
    // (sums of 4 pairs per output), then their 64-bit halves (8 pairs).
    const __m256i s01 =
        _mm256_add_epi16(_mm256_unpacklo_epi32(pairs[0], pairs[1]), _mm256_unpackhi_epi32(pairs[0], pairs[1]));
    const __m256i s23 =
        _mm256_add_epi16(_mm256_unpacklo_epi32(pairs[2], pairs[3]), _mm256_unpackhi_epi32(pairs[2], pairs[3]));
    const __m256i s = _mm256_add_epi16(_mm256_unpacklo_epi64(s01, s23), _mm256_unpackhi_epi64(s01, s23));
    const __m256i dots = _mm256_madd_epi16(s, _mm256_set1_epi16(1));
    return _mm256_sub_epi32(dots, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offset)));
  }
};

// |w| times q with w's sign moved onto q (127 x 127 x 2 < 2^15), a vector
// per output, summed by SumEach.
struct Q8_0 {
  static constexpr int64_t kBlockBytes = kQ8_0BlockBytes;
  static inline __m256i SignedWeights(const uint8_t* blk) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
  }
  template <int R, int T>
  static inline __m256i Dots(const uint8_t* const* rows, int64_t b, const Q8ActivationRow* act) {
    __m256i x[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      x[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(act[t].q + b * kQ8BlockElems));
    __m256i lanes[8];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256i w = SignedWeights(rows[r] + b * kBlockBytes);
      const __m256i u = _mm256_abs_epi8(w);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        lanes[r * T + t] = _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_sign_epi8(x[t], w)), _mm256_set1_epi16(1));
      }
    }
#pragma GCC unroll 8
    for (int p = R * T; p < 8; ++p) lanes[p] = _mm256_setzero_si256();
    return SumEach(lanes);
  }
};

// Every path computes each output the same way, so that a row's result does
// not depend on the shape of the call (which other rows and tokens came
// with it, hence how a server batched a sequence's tokens) and equals the
// portable kernel's: per block b, in order, the block's exact integer dot,
// then acc = acc + float(dot) * (d_w * d_x), each operation rounded to F32
// on its own (no fused multiply-add; the file is built with
// -ffp-contract=off).

// v with 16-bit lanes P .. R * T - 1 set to the F16 weight scales of
// block b of outputs P onwards (P a template argument: vpinsrw takes an
// immediate lane). Inserted straight from memory: fewer instructions than
// any other way tried (integer packing, vpgatherdd).
template <class W, int R, int T, int P = 0>
CAIRN_KQUANT_INLINE __m128i WeightScales(const uint8_t* const* rows, int64_t b, __m128i v) {
  if constexpr (P == R * T) {
    return v;
  } else {
    uint16_t d;
    std::memcpy(&d, rows[P / T] + b * W::kBlockBytes, 2);
    return WeightScales<W, R, T, P + 1>(rows, b, _mm_insert_epi16(v, static_cast<int16_t>(d), P));
  }
}

// Block b of a tile (below): acc + float(dots) * (d_w * d_x) per lane.
template <class W, int R, int T>
CAIRN_KQUANT_INLINE __m256 TileBlock(const uint8_t* const* rows, const Q8ActivationRow* act, int64_t b, __m256 acc) {
  const __m256i dots = W::template Dots<R, T>(rows, b, act);
  float xd[8] = {};
#pragma GCC unroll 8
  for (int p = 0; p < R * T; ++p) xd[p] = act[p % T].d[b];
  const __m256 x_scale =
      T == 1 ? _mm256_set1_ps(xd[0]) : _mm256_setr_ps(xd[0], xd[1], xd[2], xd[3], xd[4], xd[5], xd[6], xd[7]);
  const __m256 scale = _mm256_mul_ps(_mm256_cvtph_ps(WeightScales<W, R, T>(rows, b, _mm_setzero_si128())), x_scale);
  return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(dots), scale));
}

// R weight rows x T activation rows (R x T <= 8 outputs, one float lane
// each: output r * T + t), all blocks; out[r * T + t]. The R rows after
// them (the next tile's, `next` bytes further on) are fetched while this
// tile computes: R interleaved row streams defeat the hardware prefetcher,
// and a decode step (T = 1) is bound by the weights' reads.
template <class W, int R, int T>
void Tile(const uint8_t* const* rows, size_t next, const Q8ActivationRow* act, int64_t nb, float* out) {
  static_assert(R * T <= 8);
  __m256 acc = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    // Every 64-byte line of each row's next two blocks (36 or 68 bytes):
    // Q8_0's pair is longer than a line, so one prefetch at its start
    // skipped every 16th line (a demand miss on that row), so both its
    // ends are fetched (one thread, decode_bandwidth --clock cpu, five alternated
    // pairs: medians 16.7 -> 17.2 GB/s, within the noise). A prefetch past
    // the matrix's end never faults.
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      __builtin_prefetch(rows[r] + next + b * W::kBlockBytes);
      if constexpr (2 * W::kBlockBytes > 64) __builtin_prefetch(rows[r] + next + (b + 2) * W::kBlockBytes - 1);
    }
    acc = TileBlock<W, R, T>(rows, act, b, acc);
    acc = TileBlock<W, R, T>(rows, act, b + 1, acc);
  }
  if (b < nb) acc = TileBlock<W, R, T>(rows, act, b, acc);
  alignas(32) float all[8];
  _mm256_store_ps(all, acc);
  for (int p = 0; p < R * T; ++p) out[p] = all[p];
}

template <class W, int R, int T>
void TileInto(const uint8_t* w, size_t w_stride, int64_t r0, const Q8ActivationRow* act, int64_t t0, int64_t nb,
              float* y, int64_t ldy) {
  const uint8_t* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = w + (r0 + r) * w_stride;
  float out[R * T];
  Tile<W, R, T>(rows, R * w_stride, act, nb, out);
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) y[(t0 + t) * ldy + r0 + r] = out[r * T + t];
}

using TileFn = void (*)(const uint8_t*, size_t, int64_t, const Q8ActivationRow*, int64_t, int64_t, float*, int64_t);

// Register tiles of 8 outputs (one float lane each): 8 rows x 1 token
// (decode steps) or 4 rows x 2 tokens, and every smaller shape for the tails.
constexpr int kTileRows = 8;

template <class W>
struct Tiles {
  static constexpr TileFn kOneToken[kTileRows] = {&TileInto<W, 1, 1>, &TileInto<W, 2, 1>, &TileInto<W, 3, 1>,
                                                  &TileInto<W, 4, 1>, &TileInto<W, 5, 1>, &TileInto<W, 6, 1>,
                                                  &TileInto<W, 7, 1>, &TileInto<W, 8, 1>};
  static constexpr TileFn kTwoTokens[kTileRows / 2] = {&TileInto<W, 1, 2>, &TileInto<W, 2, 2>, &TileInto<W, 3, 2>,
                                                       &TileInto<W, 4, 2>};
};

// ------------------------------------------------ prompts and batched steps
// From kPanelMinTokens tokens, 8 rows go
// together as a panel whose blocks are re-laid out once per tile of tokens
// so that a 32-bit lane is a row: q[c][r] holds elements 4c..4c+3 of row r
// as signed bytes (Q4_0: nibble - 8). Per 4 elements, 8 rows and a token:
// four activation bytes broadcast, vpsignb moves the weights' signs onto
// them, vpmaddubsw with the weights' magnitudes (|w| x |x| x 2 <= 2^15 - 1)
// and vpmaddwd by ones give 32 multiply-adds in four instructions with no
// horizontal sums; per block each row lane is scaled as the tiles scale a
// block (acc + float(dot) x (d_w x d_x), no FMA). With the re-layout in
// registers (FillPanel) the panels beat the tiles from 4 tokens: one
// thread, 2048 x 2048 in cache, tiles -> panels: Q8_0 4 tokens 0.49 ->
// 0.42 ms, 8 tokens 0.98 -> 0.72 ms; Q4_0 4 tokens 0.47 -> 0.46 ms, 8
// tokens 0.94 -> 0.77 ms; at 2 tokens the tiles win (Q8_0 0.25 vs 0.28 ms).
// So a server's decode step of 4 sequences or more takes the panels.
constexpr int64_t kPanelMinTokens = 4;
constexpr int kPanelRows = 8;
constexpr int kPanelBlocks = 8;         // blocks re-laid out per fill: 256 elements of each row
constexpr int64_t kMaxPanelTile = 256;  // tokens: their accumulators, 8 KiB, on the stack

struct Panel {
  alignas(32) int32_t q[8 * kPanelBlocks][kPanelRows];
  alignas(32) float d[kPanelBlocks][kPanelRows];
};

// Blocks b0 .. b0 + blocks - 1 of the 8 rows at w: per block, the rows' 32
// signed weights (8 dwords each) transposed in registers so that dword c of
// row r lands in lane r of q[8 * i + c]. In vectors, so that a fill costs
// little next to the tokens that use it (the panels then pay from fewer
// tokens: see kPanelMinTokens).
//
// Each row's stream is prefetched one fill ahead, on into the same row of the
// next panel past the row's end (nb blocks): a batched decode step's few
// tokens take too little time per fill to hide the memory latency of eight
// strided rows (8 tokens of 64 copies of 2048 x 2048 Q8_0, from memory,
// one thread, three alternated pairs: 0.92-0.94 -> 0.79-0.88 ms); a
// prefetch past the matrix never faults.
template <class W>
void FillPanel(const uint8_t* w, size_t w_stride, int64_t b0, int blocks, int64_t nb, Panel* p) {
  for (int i = 0; i < blocks; ++i) {
    __m256i v[kPanelRows];
    const uint8_t* blk[kPanelRows];
    const int64_t ahead = b0 + i + kPanelBlocks;
    const size_t prefetch = ahead < nb ? ahead * W::kBlockBytes : kPanelRows * w_stride + (ahead - nb) * W::kBlockBytes;
#pragma GCC unroll 8
    for (int r = 0; r < kPanelRows; ++r) {
      blk[r] = w + r * w_stride + (b0 + i) * W::kBlockBytes;
      __builtin_prefetch(w + r * w_stride + prefetch);
      v[r] = W::SignedWeights(blk[r]);
    }
    _mm256_store_ps(p->d[i], _mm256_cvtph_ps(WeightScales<W, kPanelRows, 1>(blk, 0, _mm_setzero_si128())));
    Transpose8x8(v);
    __m256i* q = reinterpret_cast<__m256i*>(p->q[8 * i]);
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) _mm256_store_si256(q + c, v[c]);
  }
}

inline __m256i Broadcast32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// dots[t] (a row per int32 lane) <- the exact integer dots of a block of 8
// rows with block b of token t, the rows' 32 signed weights in 8 vectors at
// q, vector c holding each row's elements 4c..4c+3 (FillPanel's layout, and
// packed Q8_0's): per vector and token, four activation bytes broadcast,
// vpsignb moves the weights' signs onto them, vpmaddubsw with the weights'
// magnitudes (|w| x |x| x 2 <= 2^15 - 1) and vpmaddwd by ones.
template <int T>
CAIRN_KQUANT_INLINE void SignedLaneDots(const uint8_t* q, const Q8ActivationRow* act, int64_t b, __m256i* dots) {
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) dots[t] = _mm256_setzero_si256();
    // Unrolled by 2, not 8: fully unrolled, GCC re-associates the eight
    // adds into each dots[t] as a tree and spills the 32 partial products
    // (7% slower: 256 tokens of 2048 x 2048 Q8_0 in 22.0 -> 20.5 ms).
#pragma GCC unroll 2
  for (int c = 0; c < 8; ++c) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * c));
    const __m256i mag = _mm256_abs_epi8(w);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256i xs = _mm256_sign_epi8(Broadcast32(act[t].q + b * kQ8BlockElems + 4 * c), w);
      dots[t] = _mm256_add_epi32(dots[t], _mm256_madd_epi16(_mm256_maddubs_epi16(mag, xs), ones));
    }
  }
}

// a[t] = a[t] + float(dots[t]) x (d_w x d_x) per row lane, block b of token
// t: the tiles' scaling, each operation rounded on its own.
template <int T>
CAIRN_KQUANT_INLINE void ScaleInto(__m256 dw, const __m256i* dots, const Q8ActivationRow* act, int64_t b, __m256* a) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(act[t].d[b]));
    a[t] = _mm256_add_ps(a[t], _mm256_mul_ps(_mm256_cvtepi32_ps(dots[t]), scale));
  }
}

// acc[t * 8 + r] += the panel's rows . kTokens tokens over its blocks (b0
// onwards in the activations), per block SignedLaneDots then ScaleInto: the
// same operations for a token whatever kTokens. Not inlined, as the K-quant
// panels (spills).
template <int kTokens>
__attribute__((noinline)) void PanelTokens(const Panel& p, int blocks, const Q8ActivationRow* act, int64_t b0,
                                           float* acc) {
  __m256 a[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) a[t] = _mm256_loadu_ps(acc + 8 * t);
  for (int i = 0; i < blocks; ++i) {
    __m256i dots[kTokens];
    SignedLaneDots<kTokens>(reinterpret_cast<const uint8_t*>(p.q[8 * i]), act, b0 + i, dots);
    ScaleInto<kTokens>(_mm256_load_ps(p.d[i]), dots, act, b0 + i, a);
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) _mm256_storeu_ps(acc + 8 * t, a[t]);
}

// Rows in panels of 8 (n_rows a multiple of 8), tokens in tiles whose
// activations stay in L2 while every panel passes over them.
template <class W>
void PanelDot(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
              int64_t n, float* y, int64_t ldy) {
  const int64_t nb = n / kQ8BlockElems;
  int64_t tile = static_cast<int64_t>((1 << 20) / qx_stride) / 4 * 4;
  tile = tile < kPanelMinTokens ? kPanelMinTokens : tile > kMaxPanelTile ? kMaxPanelTile : tile;
  alignas(32) float acc[kMaxPanelTile * kPanelRows];
  Panel panel;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += tile) {
    const int64_t t1 = n_tokens - t0 < tile ? n_tokens : t0 + tile;
    Q8ActivationRow act[kMaxPanelTile];
    for (int64_t t = t0; t < t1; ++t) act[t - t0] = ViewQ8Activations(qx + t * qx_stride, nb);
    for (int64_t r0 = 0; r0 < n_rows; r0 += kPanelRows) {
      for (int64_t i = 0; i < (t1 - t0) * kPanelRows; ++i) acc[i] = 0.0f;
      for (int64_t b0 = 0; b0 < nb; b0 += kPanelBlocks) {
        const int blocks = static_cast<int>(nb - b0 < kPanelBlocks ? nb - b0 : kPanelBlocks);
        FillPanel<W>(w + r0 * w_stride, w_stride, b0, blocks, nb, &panel);
        int64_t t = 0;
        for (; t + 4 <= t1 - t0; t += 4) PanelTokens<4>(panel, blocks, act + t, b0, &acc[t * 8]);
        for (; t < t1 - t0; ++t) PanelTokens<1>(panel, blocks, act + t, b0, &acc[t * 8]);
      }
      for (int64_t t = t0; t < t1; ++t) _mm256_storeu_ps(y + t * ldy + r0, _mm256_loadu_ps(&acc[(t - t0) * 8]));
    }
  }
}

// Decode steps and the rows a panel leaves over: register tiles of 8
// outputs; prompts (kPanelMinTokens or more): panels of 8 rows.
template <class W>
void Dot(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
         int64_t n, float* y, int64_t ldy) {
  TakePanelRows(
      kPanelRows, kPanelMinTokens, n_tokens,
      [&](int64_t rows) { PanelDot<W>(w, w_stride, rows, qx, qx_stride, n_tokens, n, y, ldy); }, &w, w_stride, &n_rows,
      &y);
  const int64_t nb = n / kQ8BlockElems;
  for (int64_t r0 = 0; r0 < n_rows; r0 += kTileRows) {
    const int64_t nr = n_rows - r0 < kTileRows ? n_rows - r0 : kTileRows;
    int64_t t0 = 0;
    for (; t0 + 2 <= n_tokens; t0 += 2) {
      const Q8ActivationRow act[2] = {ViewQ8Activations(qx + t0 * qx_stride, nb),
                                      ViewQ8Activations(qx + (t0 + 1) * qx_stride, nb)};
      for (int64_t r = r0; r < r0 + nr; r += kTileRows / 2) {
        const int64_t rows = r0 + nr - r < kTileRows / 2 ? r0 + nr - r : kTileRows / 2;
        Tiles<W>::kTwoTokens[rows - 1](w, w_stride, r, act, t0, nb, y, ldy);
      }
    }
    if (t0 < n_tokens) {
      const Q8ActivationRow act = ViewQ8Activations(qx + t0 * qx_stride, nb);
      Tiles<W>::kOneToken[nr - 1](w, w_stride, r0, &act, t0, nb, y, ldy);
    }
  }
}

// ------------------------------------------------ packed weights (pack_rows 8)
// Weights packed once at load (QuantDotKernel::pack) so that a 32-bit lane
// is a row without any re-layout per call: a group of 8 rows of nb blocks
// takes exactly its GGUF rows' bytes, block after block (8 x the block's
// bytes each):
//   uint16_t d[8]        the 8 rows' F16 scales: one vcvtph2ps
//   uint8_t  q[k][8][4]  k 32-byte vectors of 4 quant bytes per row
// Per block and token the 8 rows' exact integer dots take vpmaddubsw with
// broadcast activations and no horizontal sums (PackedQ4_0, PackedQ8_0);
// the scaling is the tiles' (acc + float(dot) x (d_w x d_x)), so every
// output has the bits of `dot` on the GGUF rows. A decode step reads the
// matrix as one sequential stream instead of 8 interleaved row streams
// (the scales inside it: apart, as a second stream, they read slower), and
// a prompt's panels need no re-layout (FillPanel).
constexpr int kPackRows = 8;
constexpr int64_t kPackScaleBytes = 2 * kPackRows;  // per block of a group
constexpr int64_t kPackedChunkBlocks = 8;           // blocks per pass of a prompt's tokens (in L1)
constexpr int64_t kPackAhead = 2048;                // bytes a decode step's stream is fetched ahead

// k = 4: vector j holds each row's bytes 4j..4j+3 (low nibbles: elements
// 4j..4j+3, high nibbles: 16+4j..16+4j+3). 8 vpmaddubsw per block and
// token on the nibbles as they are (value + 8), int16 adds (8 pairs of at
// most 2 x 15 x 127: below 2^15), one vpmaddwd and the subtraction of 8 x
// the activations' sum.
struct PackedQ4_0 {
  static constexpr int64_t kBlockBytes = kQ4_0BlockBytes;
  static constexpr int kVectors = 4;  // 32-byte quant vectors per block of a group
  static constexpr int64_t kPackedBlockBytes = kPackRows * kBlockBytes;
  static constexpr int kPrefetchLines = 2;  // of the 2.25 lines a block takes (see PackedTokens)

  // Row r's GGUF block at blk into the quant vectors of its packed block at q.
  static void PackBlock(const uint8_t* blk, int r, uint8_t* q) {
    for (int j = 0; j < kVectors; ++j) std::memcpy(q + 32 * j + 4 * r, blk + 2 + 4 * j, 4);
  }

  // dots[t] (a row per int32 lane) <- the exact integer dots of the block
  // of the group's quants at q with block b of token t.
  template <int T>
  static CAIRN_KQUANT_INLINE void Dots(const uint8_t* q, const Q8ActivationRow* act, int64_t b, __m256i* dots) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256i s[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int j = 0; j < kVectors; ++j) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * j));
      const __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int8_t* x = act[t].q + b * kQ8BlockElems + 4 * j;
        s[t] = _mm256_add_epi16(s[t], _mm256_add_epi16(_mm256_maddubs_epi16(lo, Broadcast32(x)),
                                                       _mm256_maddubs_epi16(hi, Broadcast32(x + 16))));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      dots[t] = _mm256_sub_epi32(_mm256_madd_epi16(s[t], _mm256_set1_epi16(1)), _mm256_set1_epi32(8 * act[t].sum[b]));
    }
  }
};

// k = 8: vector c holds each row's elements 4c..4c+3, as FillPanel lays
// them out (SignedLaneDots).
struct PackedQ8_0 {
  static constexpr int64_t kBlockBytes = kQ8_0BlockBytes;
  static constexpr int kVectors = 8;
  static constexpr int64_t kPackedBlockBytes = kPackRows * kBlockBytes;
  static constexpr int kPrefetchLines = 4;  // of 4.25

  static void PackBlock(const uint8_t* blk, int r, uint8_t* q) {
    for (int c = 0; c < kVectors; ++c) std::memcpy(q + 32 * c + 4 * r, blk + 2 + 4 * c, 4);
  }

  template <int T>
  static CAIRN_KQUANT_INLINE void Dots(const uint8_t* q, const Q8ActivationRow* act, int64_t b, __m256i* dots) {
    SignedLaneDots<T>(q, act, b, dots);
  }
};

// out <- the n_rows rows (a multiple of kPackRows) at w, packed as above.
template <class P>
void Pack(const uint8_t* w, int64_t n_rows, int64_t n, uint8_t* out) {
  PackGroups<kPackRows>(w, n_rows, n / kQ8BlockElems, P::kBlockBytes, out,
                        [](const uint8_t* src, int r, uint8_t* block) {
                          std::memcpy(block + 2 * r, src, 2);
                          P::PackBlock(src, r, block + kPackScaleBytes);
                        });
}

// acc[t * 8 + r] over the packed blocks b0 .. b0 + blocks - 1 of one group
// (block b0 at p) and T tokens: per block, acc = acc + float(dot) x (d_w x
// d_x), as the tiles. 2 KiB ahead are fetched as it goes, kPrefetchLines
// lines per block, a few short of the block's lines (the hardware's
// prefetcher takes the rest): Q4_0 decode steps from memory ran at 1.10-1.18
// x the GGUF rows' speed without, 1.4-1.6 with 2 lines, 1.2-1.5 with 3 or
// every line once, 0.9 with one; Q8_0 best with 4 of its 4.25 (one thread,
// 256 MiB, alternated runs of decode_bandwidth --clock cpu, noisy: +-10%;
// 1 or 4 KiB ahead did no better). A prefetch past the matrix never faults.
template <class P, int T>
__attribute__((noinline)) void PackedTokens(const uint8_t* p, int64_t blocks, const Q8ActivationRow* act, int64_t b0,
                                            float* acc) {
  __m256 a[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) a[t] = _mm256_loadu_ps(acc + 8 * t);
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* block = p + i * P::kPackedBlockBytes;
#pragma GCC unroll 8
    for (int line = 0; line < P::kPrefetchLines; ++line) __builtin_prefetch(block + kPackAhead + 64 * line);
    __m256i dots[T];
    P::template Dots<T>(block + kPackScaleBytes, act, b0 + i, dots);
    ScaleInto<T>(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block))), dots, act, b0 + i, a);
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(acc + 8 * t, a[t]);
}

using PackedTokensFn = void (*)(const uint8_t*, int64_t, const Q8ActivationRow*, int64_t, float*);

// As Dot on packed groups (n_rows a multiple of kPackRows): tokens in tiles
// whose activations stay in L2 while every group passes over them; per
// group, 4 tokens at a time over chunks of blocks that stay in L1 (a
// decode step, fewer than 4 tokens: the whole row in one pass).
template <class P>
void PackedDot(const uint8_t* w, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens, int64_t n,
               float* y, int64_t ldy) {
  static constexpr PackedTokensFn kFew[4] = {nullptr, &PackedTokens<P, 1>, &PackedTokens<P, 2>, &PackedTokens<P, 3>};
  const int64_t nb = n / kQ8BlockElems;
  const size_t group_bytes = static_cast<size_t>(nb) * P::kBlockBytes * kPackRows;
  const int64_t chunk = n_tokens < 4 ? nb : kPackedChunkBlocks;
  int64_t tile = static_cast<int64_t>((1 << 20) / qx_stride) / 4 * 4;
  tile = tile < 4 ? 4 : tile > kMaxPanelTile ? kMaxPanelTile : tile;
  alignas(32) float acc[kMaxPanelTile * kPackRows];
  for (int64_t t0 = 0; t0 < n_tokens; t0 += tile) {
    const int64_t nt = n_tokens - t0 < tile ? n_tokens - t0 : tile;
    Q8ActivationRow act[kMaxPanelTile];
    for (int64_t t = 0; t < nt; ++t) act[t] = ViewQ8Activations(qx + (t0 + t) * qx_stride, nb);
    for (int64_t r0 = 0; r0 < n_rows; r0 += kPackRows) {
      const uint8_t* group = w + (r0 / kPackRows) * group_bytes;
      for (int64_t i = 0; i < nt * kPackRows; ++i) acc[i] = 0.0f;
      for (int64_t b0 = 0; b0 < nb; b0 += chunk) {
        const int64_t blocks = nb - b0 < chunk ? nb - b0 : chunk;
        const uint8_t* p = group + b0 * P::kPackedBlockBytes;
        int64_t t = 0;
        for (; t + 4 <= nt; t += 4) PackedTokens<P, 4>(p, blocks, act + t, b0, &acc[t * kPackRows]);
        if (t < nt) kFew[nt - t](p, blocks, act + t, b0, &acc[t * kPackRows]);
      }
      for (int64_t t = 0; t < nt; ++t) {
        _mm256_storeu_ps(y + (t0 + t) * ldy + r0, _mm256_load_ps(&acc[t * kPackRows]));
      }
    }
  }
}

}  // namespace

constinit const QuantDotKernel kQ8_0Avx2 = {
    GgmlType::kQ8_0, "avx2", kQ8BlockElems, &Q8ActivationRowBytes, &QuantizeQ8Activations,
    &Dot<Q8_0>,      true,   kPackRows,     &Pack<PackedQ8_0>,     &PackedDot<PackedQ8_0>};
constinit const QuantDotKernel kQ4_0Avx2 = {
    GgmlType::kQ4_0, "avx2", kQ8BlockElems, &Q8ActivationRowBytes, &QuantizeQ8Activations,
    &Dot<Q4_0>,      true,   kPackRows,     &Pack<PackedQ4_0>,     &PackedDot<PackedQ4_0>};

}  // namespace cairn
