// What the AVX2 and AVX-512 K-quant kernel files share: the block layout as
// they read it (fp16 scales, the packed 6-bit scales and mins of Q4_K /
// Q5_K, the per-row scales of a prompt panel), the q8_K row size, and the
// 256-bit integer sums and transposes both use (as does the AVX2 Q8_0 /
// Q4_0 file, quant_dot_block_avx2.cc). Included only by those files, each compiled
// with its own ISA flags: everything here sits in an unnamed
// namespace, so each file gets its own copy, built for its own ISA (with
// external linkage the linker could keep one file's AVX-512 copy for both,
// see quant_dot_internal.h).
#ifndef CAIRN_BACKENDS_KERNELS_QUANT_DOT_KQUANT_BLOCKS_H_
#define CAIRN_BACKENDS_KERNELS_QUANT_DOT_KQUANT_BLOCKS_H_

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/kernels/quant_dot_kquant.h"

namespace cairn {
namespace {  // NOLINT(build/namespaces_headers): one copy per ISA file, on purpose

// Called per block in the hot loops: always inlined (GCC does not inline
// them through the kernels' template function pointers by itself).
#define CAIRN_KQUANT_INLINE inline __attribute__((always_inline))

// No std:: templates in the kernel files (std::max, std::vector ...): their
// out-of-line copies are shared by every file at link time, and one ISA
// file's would use instructions other CPUs lack. Local helpers here instead.
inline int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t Max(int64_t a, int64_t b) { return a > b ? a : b; }

// The loops over the small compile-time counts (rows, tokens, groups) carry
// "#pragma GCC unroll": at -O2 GCC keeps them as loops, and the arrays of
// accumulators they index then live in memory instead of registers (2x
// slower measured).

// Bytes of a q8_K activation row of n elements (quant_dot_kquant.h).
inline size_t Q8KRowBytes(int64_t n) { return static_cast<size_t>(n / kQ8KBlockElems) * kQ8KBlockBytes; }

// The sum of the eight int32 lanes of v.
CAIRN_KQUANT_INLINE int32_t ReduceAdd(__m256i v) {
  __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4E));
  x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xB1));
  return _mm_cvtsi128_si32(x);
}

// The sums of eight vectors of 8 int32: lane i holds the sum of v[i], exact
// (integers, any order). Interleaves and adds rather than vphaddd, which Zen
// 3 runs as several uops on the port vpmaddubsw and vpmaddwd also need. Per
// 128-bit half: v[2k], v[2k+1] interleaved and added, then the pairs'
// 64-bit halves, then the two 128-bit halves.
CAIRN_KQUANT_INLINE __m256i SumEach(const __m256i* v) {
  __m256i s[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    s[k] =
        _mm256_add_epi32(_mm256_unpacklo_epi32(v[2 * k], v[2 * k + 1]), _mm256_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
  }
  const __m256i a = _mm256_add_epi32(_mm256_unpacklo_epi64(s[0], s[1]), _mm256_unpackhi_epi64(s[0], s[1]));
  const __m256i b = _mm256_add_epi32(_mm256_unpacklo_epi64(s[2], s[3]), _mm256_unpackhi_epi64(s[2], s[3]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// v[r] (8 dwords of row r) become v[c] (dword c of every row): an 8 x 8
// transpose in registers, 24 shuffles (the AVX2 prompt panels' re-layout).
CAIRN_KQUANT_INLINE void Transpose8x8(__m256i* v) {
  __m256i t[8], s[8];
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_epi32(v[2 * k], v[2 * k + 1]);      // rows 2k, 2k+1: dwords 0, 1 | 4, 5
    t[2 * k + 1] = _mm256_unpackhi_epi32(v[2 * k], v[2 * k + 1]);  // dwords 2, 3 | 6, 7
  }
#pragma GCC unroll 2
  for (int k = 0; k < 2; ++k) {  // rows 4k..4k+3: dword j | j + 4 in s[4k + j]
    s[4 * k] = _mm256_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    s[4 * k + 1] = _mm256_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    s[4 * k + 2] = _mm256_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    s[4 * k + 3] = _mm256_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_permute2x128_si256(s[j], s[4 + j], 0x20);
    v[j + 4] = _mm256_permute2x128_si256(s[j], s[4 + j], 0x31);
  }
}

CAIRN_KQUANT_INLINE float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

CAIRN_KQUANT_INLINE uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Q4_K / Q5_K: eight 6-bit scales and eight 6-bit mins packed in 12 bytes,
// unpacked as two words of eight bytes each.
CAIRN_KQUANT_INLINE void ScalesMinsK4(const uint8_t* p, uint64_t* sc, uint64_t* mn) {
  const uint32_t a = Load32(p), b = Load32(p + 4), c = Load32(p + 8);
  const uint32_t sc_hi = (c & 0x0f0f0f0f) | ((a >> 2) & 0x30303030);
  const uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0f) | ((b >> 2) & 0x30303030);
  *sc = (a & 0x3f3f3f3f) | (static_cast<uint64_t>(sc_hi) << 32);
  *mn = (b & 0x3f3f3f3f) | (static_cast<uint64_t>(mn_hi) << 32);
}

// One block of a prompt panel of kRows weight rows (a row per int32 lane of
// the ISA's vector: 16 for AVX-512; the AVX2 file has its own 8-row layout,
// with int16-paired scales), each array aligned to one vector.
template <int kRows>
struct PanelBlockOf {
  alignas(4 * kRows) int32_t q[64][kRows];
  alignas(4 * kRows) int32_t scale[16][kRows];    // [group][row]
  alignas(4 * kRows) int32_t min_pair[8][kRows];  // [k][row]: int16 mins of groups 2k, 2k+1
  alignas(4 * kRows) float d[kRows];
  alignas(4 * kRows) float dmin[kRows];
};

// Per-type scales of a panel block: kGroupShift = log2(elements per scale).
template <int kRows>
struct PanelScalesK4Of {
  static constexpr int kGroupShift = 5;
  static void Fill(const uint8_t* b, int r, PanelBlockOf<kRows>* pb) {
    const float d = Half(b), dmin = Half(b + 2);
    uint64_t sc, mn;
    ScalesMinsK4(b + 4, &sc, &mn);
    for (int g = 0; g < 8; ++g) {
      const uint32_t m = (mn >> (8 * g)) & 0xFF;
      pb->scale[g][r] = static_cast<int32_t>((sc >> (8 * g)) & 0xFF);
      pb->min_pair[g][r] = static_cast<int32_t>(m | (m << 16));  // both groups of 16 of sub-block g
    }
    pb->d[r] = d;
    pb->dmin[r] = dmin;
  }
};

template <int kRows>
struct PanelScalesQ6KOf {
  static constexpr int kGroupShift = 4;
  static void Fill(const uint8_t* b, int r, PanelBlockOf<kRows>* pb) {
    const float d = Half(b + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    for (int g = 0; g < 16; ++g) pb->scale[g][r] = sc[g];
    for (int k = 0; k < 8; ++k) {
      const uint32_t lo = static_cast<uint16_t>(32 * sc[2 * k]), hi = static_cast<uint16_t>(32 * sc[2 * k + 1]);
      pb->min_pair[k][r] = static_cast<int32_t>(lo | (hi << 16));
    }
    pb->d[r] = d;
    pb->dmin[r] = d;
  }
};

// The loop of every packed layout (QuantDotKernel::pack): n_rows rows of
// nb blocks of block_bytes at w, in groups of kRows rows; block b of a group
// takes kRows blocks' bytes at b times that from the group's start, and
// pack_block(src, r, dst) writes row r's block src into it at dst.
template <int kRows, class PackBlock>
inline void PackGroups(const uint8_t* w, int64_t n_rows, int64_t nb, size_t block_bytes, uint8_t* out,
                       PackBlock&& pack_block) {
  const size_t row_bytes = static_cast<size_t>(nb) * block_bytes;
  for (int64_t r0 = 0; r0 < n_rows; r0 += kRows) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* dst = out + static_cast<size_t>(r0) * row_bytes + static_cast<size_t>(b) * kRows * block_bytes;
      for (int r = 0; r < kRows; ++r) pack_block(w + static_cast<size_t>(r0 + r) * row_bytes + b * block_bytes, r, dst);
    }
  }
}

}  // namespace
}  // namespace cairn

#endif  // CAIRN_BACKENDS_KERNELS_QUANT_DOT_KQUANT_BLOCKS_H_
