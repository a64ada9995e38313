#include "backends/kernels/vec.h"

#include <cstring>

#include "backends/model/dequant.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
// GCC 12 reports its own _mm512_undefined_* placeholders inside the AVX-512
// intrinsics as uninitialized once they are inlined here: a false positive.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define CAIRN_AVX512 1
#endif

namespace cairn {
namespace {

inline float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
#if defined(__F16C__)
  return _cvtsh_ss(h);  // one instruction instead of a branchy library call
#else
  return Fp16ToFp32(h);
#endif
}

// Generic path: dequantize up to 512 elements at a time into a stack buffer
// and take the F32 dot product (exact dequantization, F32 activations).
float DotRowGeneric(GgmlType type, const uint8_t* row, const float* x, int64_t n) {
  const GgmlTypeTraits& t = Traits(type);
  const int64_t chunk = t.block_size >= 512 ? t.block_size : (512 / t.block_size) * t.block_size;
  alignas(64) float buf[512];
  float sum = 0.0f;
  for (int64_t i = 0; i < n; i += chunk) {
    int64_t len = n - i < chunk ? n - i : chunk;
    DequantizeRow(type, row + (i / t.block_size) * t.block_bytes, buf, len);
    sum += DotF32(buf, x + i, len);
  }
  return sum;
}

#ifdef CAIRN_AVX512

inline __m512 Cvt16xI8(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v)); }
inline __m512 Cvt16xU8(__m128i v) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)); }

float DotF16(const uint8_t* row, const float* x, int64_t n) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 w0 = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)));
    __m512 w1 = _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i + 16)));
    acc0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i), acc0);
    acc1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i + 16), acc1);
  }
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += Fp16ToFp32(h[i]) * x[i];
  return sum;
}

float DotQ8_0(const uint8_t* row, const float* x, int64_t n) {
  // Two blocks per step on separate accumulators: one FMA chain per block
  // would make this latency-bound.
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  const int64_t nb = n / 32;
  int64_t b = 0;
  auto block = [](const uint8_t* blk, const float* xb) {
    const __m128i* q = reinterpret_cast<const __m128i*>(blk + 2);
    __m512 p = _mm512_mul_ps(Cvt16xI8(_mm_loadu_si128(q)), _mm512_loadu_ps(xb));
    return _mm512_fmadd_ps(Cvt16xI8(_mm_loadu_si128(q + 1)), _mm512_loadu_ps(xb + 16), p);
  };
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* blk = row + b * 34;
    acc0 = _mm512_fmadd_ps(_mm512_set1_ps(Half(blk)), block(blk, x + b * 32), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_set1_ps(Half(blk + 34)), block(blk + 34, x + b * 32 + 32), acc1);
  }
  for (; b < nb; ++b) {
    acc0 = _mm512_fmadd_ps(_mm512_set1_ps(Half(row + b * 34)), block(row + b * 34, x + b * 32), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

// 4-bit formats: every sub-block's 16 possible values are computed once
// exactly as the reference dequantizes them (same float operations), then
// looked up per element with vpermps (which reads only the index's low four
// bits). This replaces a widen + int-to-float conversion per 16 elements.
const __m512 kIota = _mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);

inline __m512i Widen16(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Q4_0: y = (q - 8) * d.
inline __m512 TableQ4_0(const uint8_t* b) {
  return _mm512_mul_ps(_mm512_sub_ps(kIota, _mm512_set1_ps(8.0f)), _mm512_set1_ps(Half(b)));
}
// Q4_1: y = q * d + m.
inline __m512 TableQ4_1(const uint8_t* b) {
  return _mm512_add_ps(_mm512_mul_ps(kIota, _mm512_set1_ps(Half(b))), _mm512_set1_ps(Half(b + 2)));
}

template <__m512 (*Table)(const uint8_t*), size_t kBlockBytes, size_t kQsOffset>
float DotQ4Block32(const uint8_t* row, const float* x, int64_t n) {
  // Named accumulators (an indexed array would live in memory), two blocks
  // per step so that no FMA waits for the previous one.
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  auto block = [](const uint8_t* blk, const float* xb, __m512& lo, __m512& hi) {
    const __m512 t = Table(blk);
    const __m512i q = Widen16(blk + kQsOffset);
    lo = _mm512_fmadd_ps(_mm512_permutexvar_ps(q, t), _mm512_loadu_ps(xb), lo);
    hi = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), t), _mm512_loadu_ps(xb + 16), hi);
  };
  const int64_t nb = n / 32;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    block(row + b * kBlockBytes, x + b * 32, a0, a1);
    block(row + (b + 1) * kBlockBytes, x + b * 32 + 32, a2, a3);
  }
  if (b < nb) block(row + b * kBlockBytes, x + b * 32, a0, a1);
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

template <__m512 (*Table)(const uint8_t*), size_t kBlockBytes, size_t kQsOffset>
void DequantQ4Block32(const uint8_t* row, float* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, row += kBlockBytes, y += 32) {
    const __m512 t = Table(row);
    const __m512i q = Widen16(row + kQsOffset);
    _mm512_storeu_ps(y, _mm512_permutexvar_ps(q, t));
    _mm512_storeu_ps(y + 16, _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), t));
  }
}

inline void ScaleMinK4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K: 8 sub-blocks of 32 with y = (d * sc) * q - dmin * m. Calls
// f(w0, i0, w1, i1, w2, i2, w3, i3) for each 64-element chunk: four groups of
// 16 dequantized values and their element offsets.
template <typename F>
inline void ForEachQ4_K(const uint8_t* row, int64_t n, F&& f) {
  for (int64_t b = 0; b < n / 256; ++b, row += 144) {
    const float d = Half(row), dmin = Half(row + 2);
    const uint8_t* scales = row + 4;
    const uint8_t* qs = row + 16;
    for (int c = 0; c < 4; ++c) {
      int sc0, m0, sc1, m1;
      ScaleMinK4(2 * c, scales, &sc0, &m0);
      ScaleMinK4(2 * c + 1, scales, &sc1, &m1);
      const __m512 t0 = _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(d * static_cast<float>(sc0)), kIota),
                                      _mm512_set1_ps(dmin * static_cast<float>(m0)));
      const __m512 t1 = _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(d * static_cast<float>(sc1)), kIota),
                                      _mm512_set1_ps(dmin * static_cast<float>(m1)));
      const int64_t base = b * 256 + 64 * c;
      const __m512i q0 = Widen16(qs + 32 * c);
      const __m512i q1 = Widen16(qs + 32 * c + 16);
      f(_mm512_permutexvar_ps(q0, t0), base, _mm512_permutexvar_ps(q1, t0), base + 16,
        _mm512_permutexvar_ps(_mm512_srli_epi32(q0, 4), t1), base + 32,
        _mm512_permutexvar_ps(_mm512_srli_epi32(q1, 4), t1), base + 48);
    }
  }
}

float DotQ4_K(const uint8_t* row, const float* x, int64_t n) {
  // Four accumulators: each gets one FMA per 64 elements.
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  ForEachQ4_K(row, n, [&](__m512 w0, int64_t i0, __m512 w1, int64_t i1, __m512 w2, int64_t i2, __m512 w3, int64_t i3) {
    a0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i0), a0);
    a1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i1), a1);
    a2 = _mm512_fmadd_ps(w2, _mm512_loadu_ps(x + i2), a2);
    a3 = _mm512_fmadd_ps(w3, _mm512_loadu_ps(x + i3), a3);
  });
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// Q5_K: 8 sub-blocks of 32 with 5-bit q and y = (d * sc) * q - dmin * m:
// a 32-entry table (two registers) per sub-block, indexed by the nibble
// with the high bit from qh as bit 4 (vpermt2ps). Calls f as ForEachQ4_K.
template <typename F>
inline void ForEachQ5_K(const uint8_t* row, int64_t n, F&& f) {
  const __m512 iota16 = _mm512_add_ps(kIota, _mm512_set1_ps(16.0f));
  const __m512i m4 = _mm512_set1_epi32(0x0F);
  const __m512i bit4 = _mm512_set1_epi32(0x10);
  for (int64_t b = 0; b < n / 256; ++b, row += 176) {
    const float d = Half(row), dmin = Half(row + 2);
    const uint8_t* scales = row + 4;
    const uint8_t* qh = row + 16;
    const uint8_t* qs = row + 48;
    const __m512i h0 = Widen16(qh), h1 = Widen16(qh + 16);
    // The 32 values of sub-block (c, half), as two groups of 16.
    auto sub = [&](int c, int half, __m512& w0, __m512& w1) {
      int sc, m;
      ScaleMinK4(2 * c + half, scales, &sc, &m);
      const __m512 dd = _mm512_set1_ps(d * static_cast<float>(sc));
      const __m512 mm = _mm512_set1_ps(dmin * static_cast<float>(m));
      const __m512 t_lo = _mm512_sub_ps(_mm512_mul_ps(dd, kIota), mm);
      const __m512 t_hi = _mm512_sub_ps(_mm512_mul_ps(dd, iota16), mm);
      const int shift = 2 * c + half;  // qh bit of this sub-block
      __m512i q0 = Widen16(qs + 32 * c), q1 = Widen16(qs + 32 * c + 16);
      q0 = half ? _mm512_srli_epi32(q0, 4) : _mm512_and_si512(q0, m4);
      q1 = half ? _mm512_srli_epi32(q1, 4) : _mm512_and_si512(q1, m4);
      const __m512i b0 = _mm512_and_si512(_mm512_slli_epi32(_mm512_srli_epi32(h0, shift), 4), bit4);
      const __m512i b1 = _mm512_and_si512(_mm512_slli_epi32(_mm512_srli_epi32(h1, shift), 4), bit4);
      w0 = _mm512_permutex2var_ps(t_lo, _mm512_or_si512(q0, b0), t_hi);
      w1 = _mm512_permutex2var_ps(t_lo, _mm512_or_si512(q1, b1), t_hi);
    };
    for (int c = 0; c < 4; ++c) {
      __m512 w0, w1, w2, w3;
      sub(c, 0, w0, w1);
      sub(c, 1, w2, w3);
      const int64_t base = b * 256 + 64 * c;
      f(w0, base, w1, base + 16, w2, base + 32, w3, base + 48);
    }
  }
}

float DotQ5_K(const uint8_t* row, const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  ForEachQ5_K(row, n, [&](__m512 w0, int64_t i0, __m512 w1, int64_t i1, __m512 w2, int64_t i2, __m512 w3, int64_t i3) {
    a0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i0), a0);
    a1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i1), a1);
    a2 = _mm512_fmadd_ps(w2, _mm512_loadu_ps(x + i2), a2);
    a3 = _mm512_fmadd_ps(w3, _mm512_loadu_ps(x + i3), a3);
  });
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

float DotQ6_K(const uint8_t* row, const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  const __m256i k32 = _mm256_set1_epi8(32);
  for (int64_t b = 0; b < n / 256; ++b, row += 210) {
    const uint8_t* ql = row;
    const uint8_t* qh = row + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(row + 192);
    const float d = Half(row + 208);
    const float* xb = x + b * 256;
    for (int h = 0; h < 2; ++h, ql += 64, qh += 32, sc += 8, xb += 128) {
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
      // 32 values of q - 32 (int8) for x[32 j .. 32 j + 31], scales sc[2j], sc[2j+1].
      auto group = [&](__m256i q, int j, __m512& acc) {
        const __m256i v = _mm256_sub_epi8(q, k32);
        const __m512 lo = _mm512_mul_ps(Cvt16xI8(_mm256_castsi256_si128(v)), _mm512_loadu_ps(xb + 32 * j));
        const __m512 hi = _mm512_mul_ps(Cvt16xI8(_mm256_extracti128_si256(v, 1)), _mm512_loadu_ps(xb + 32 * j + 16));
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d * static_cast<float>(sc[2 * j])), lo, acc);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d * static_cast<float>(sc[2 * j + 1])), hi, acc);
      };
      group(_mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30)), 0, a0);
      group(_mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30)), 1, a1);
      group(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30)), 2, a2);
      group(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                            _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30)),
            3, a3);
    }
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

void DequantQ8_0(const uint8_t* row, float* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, row += 34, y += 32) {
    const __m512 d = _mm512_set1_ps(Half(row));
    const __m128i* q = reinterpret_cast<const __m128i*>(row + 2);
    _mm512_storeu_ps(y, _mm512_mul_ps(Cvt16xI8(_mm_loadu_si128(q)), d));
    _mm512_storeu_ps(y + 16, _mm512_mul_ps(Cvt16xI8(_mm_loadu_si128(q + 1)), d));
  }
}

void DequantQ6_K(const uint8_t* row, float* y, int64_t n) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  const __m256i k32 = _mm256_set1_epi8(32);
  for (int64_t b = 0; b < n / 256; ++b, row += 210) {
    const uint8_t* ql = row;
    const uint8_t* qh = row + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(row + 192);
    const float d = Half(row + 208);
    float* yb = y + b * 256;
    for (int h = 0; h < 2; ++h, ql += 64, qh += 32, sc += 8, yb += 128) {
      __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m30));
      q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m30));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m30));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(hb, 2), m30));
      for (int j = 0; j < 4; ++j) {
        __m256i v = _mm256_sub_epi8(q[j], k32);
        // (d * sc) * q, in the reference's order.
        _mm512_storeu_ps(yb + 32 * j, _mm512_mul_ps(_mm512_set1_ps(d * static_cast<float>(sc[2 * j])),
                                                    Cvt16xI8(_mm256_castsi256_si128(v))));
        _mm512_storeu_ps(yb + 32 * j + 16, _mm512_mul_ps(_mm512_set1_ps(d * static_cast<float>(sc[2 * j + 1])),
                                                         Cvt16xI8(_mm256_extracti128_si256(v, 1))));
      }
    }
  }
}

#endif  // CAIRN_AVX512

}  // namespace

float DotF32(const float* a, const float* b, int64_t n) {
  int64_t i = 0;
#ifdef CAIRN_AVX512
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 32), _mm512_loadu_ps(b + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 48), _mm512_loadu_ps(b + i + 48), acc3);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
  if (i < n) {
    __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc1);
    i = n;
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
#else
  float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) lanes[k] += a[i + k] * b[i + k];
  float sum = 0.0f;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (float l : lanes) sum += l;
  return sum;
#endif
}

void AxpyF32(float a, const float* x, float* y, int64_t n) {
  int64_t i = 0;
#ifdef CAIRN_AVX512
  const __m512 va = _mm512_set1_ps(a);
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  }
#endif
  for (; i < n; ++i) y[i] += a * x[i];
}

void AddF32(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
#ifdef CAIRN_AVX512
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i)));
#endif
  for (; i < n; ++i) y[i] = a[i] + b[i];
}

void DequantizeRowFast(GgmlType type, const uint8_t* row, float* y, int64_t n) {
  switch (type) {
#ifdef CAIRN_AVX512
    case GgmlType::kF16: {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(row);
      int64_t i = 0;
      for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(y + i,
                         _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
      }
      for (; i < n; ++i) y[i] = Fp16ToFp32(h[i]);
      return;
    }
    case GgmlType::kQ8_0:
      return DequantQ8_0(row, y, n);
    case GgmlType::kQ4_0:
      return DequantQ4Block32<TableQ4_0, 18, 2>(row, y, n);
    case GgmlType::kQ4_1:
      return DequantQ4Block32<TableQ4_1, 20, 4>(row, y, n);
    case GgmlType::kQ4_K:
      ForEachQ4_K(row, n,
                  [&](__m512 w0, int64_t i0, __m512 w1, int64_t i1, __m512 w2, int64_t i2, __m512 w3, int64_t i3) {
                    _mm512_storeu_ps(y + i0, w0);
                    _mm512_storeu_ps(y + i1, w1);
                    _mm512_storeu_ps(y + i2, w2);
                    _mm512_storeu_ps(y + i3, w3);
                  });
      return;
    case GgmlType::kQ5_K:
      ForEachQ5_K(row, n,
                  [&](__m512 w0, int64_t i0, __m512 w1, int64_t i1, __m512 w2, int64_t i2, __m512 w3, int64_t i3) {
                    _mm512_storeu_ps(y + i0, w0);
                    _mm512_storeu_ps(y + i1, w1);
                    _mm512_storeu_ps(y + i2, w2);
                    _mm512_storeu_ps(y + i3, w3);
                  });
      return;
    case GgmlType::kQ6_K:
      return DequantQ6_K(row, y, n);
#endif
    default:
      return DequantizeRow(type, row, y, n);
  }
}

float DotRow(GgmlType type, const uint8_t* row, const float* x, int64_t n) {
  switch (type) {
    case GgmlType::kF32:
      return DotF32(reinterpret_cast<const float*>(row), x, n);
#ifdef CAIRN_AVX512
    case GgmlType::kF16:
      return DotF16(row, x, n);
    case GgmlType::kQ8_0:
      return DotQ8_0(row, x, n);
    case GgmlType::kQ4_0:
      return DotQ4Block32<TableQ4_0, 18, 2>(row, x, n);
    case GgmlType::kQ4_1:
      return DotQ4Block32<TableQ4_1, 20, 4>(row, x, n);
    case GgmlType::kQ4_K:
      return DotQ4_K(row, x, n);
    case GgmlType::kQ5_K:
      return DotQ5_K(row, x, n);
    case GgmlType::kQ6_K:
      return DotQ6_K(row, x, n);
#endif
    default:
      return DotRowGeneric(type, row, x, n);
  }
}

}  // namespace cairn
