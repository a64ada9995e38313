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
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / 32; ++b, row += 34, x += 32) {
    const __m128i* q = reinterpret_cast<const __m128i*>(row + 2);
    __m512 p = _mm512_mul_ps(Cvt16xI8(_mm_loadu_si128(q)), _mm512_loadu_ps(x));
    p = _mm512_fmadd_ps(Cvt16xI8(_mm_loadu_si128(q + 1)), _mm512_loadu_ps(x + 16), p);
    acc = _mm512_fmadd_ps(_mm512_set1_ps(Half(row)), p, acc);
  }
  return _mm512_reduce_add_ps(acc);
}

float DotQ4_0(const uint8_t* row, const float* x, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i eight = _mm_set1_epi8(8);
  for (int64_t b = 0; b < n / 32; ++b, row += 18, x += 32) {
    __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2));
    __m128i lo = _mm_sub_epi8(_mm_and_si128(qs, mask), eight);
    __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), mask), eight);
    __m512 p = _mm512_mul_ps(Cvt16xI8(lo), _mm512_loadu_ps(x));
    p = _mm512_fmadd_ps(Cvt16xI8(hi), _mm512_loadu_ps(x + 16), p);
    acc = _mm512_fmadd_ps(_mm512_set1_ps(Half(row)), p, acc);
  }
  return _mm512_reduce_add_ps(acc);
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

// Q4_K / Q5_K: y = d*sc*q - dmin*m per 32-element sub-block, so
// dot = sum_s d*sc_s * <q, x>_s - dmin*m_s * sum(x)_s.
template <bool kFive>
float DotQxK(const uint8_t* row, const float* x, int64_t n) {
  constexpr size_t kBlockBytes = kFive ? 176 : 144;
  __m512 acc = _mm512_setzero_ps();
  __m512 accm = _mm512_setzero_ps();
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i one = _mm_set1_epi8(1);
  for (int64_t b = 0; b < n / 256; ++b, row += kBlockBytes) {
    const float d = Half(row), dmin = Half(row + 2);
    const uint8_t* scales = row + 4;
    const uint8_t* qh = row + 16;
    const uint8_t* qs = row + (kFive ? 48 : 16);
    const float* xb = x + b * 256;
    for (int c = 0; c < 4; ++c) {
      const uint8_t* q = qs + 32 * c;
      for (int half = 0; half < 2; ++half) {  // low nibbles, then high
        int sc, m;
        ScaleMinK4(2 * c + half, scales, &sc, &m);
        const float* xs = xb + 64 * c + 32 * half;
        __m512 pq = _mm512_setzero_ps();
        __m512 px = _mm512_setzero_ps();
        for (int k = 0; k < 2; ++k) {
          __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * k));
          v = half ? _mm_and_si128(_mm_srli_epi16(v, 4), mask) : _mm_and_si128(v, mask);
          if constexpr (kFive) {
            __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qh + 16 * k));
            const int shift = 2 * c + half;
            h = _mm_and_si128(_mm_srl_epi16(h, _mm_cvtsi32_si128(shift)), one);
            v = _mm_or_si128(v, _mm_slli_epi16(h, 4));
          }
          __m512 xv = _mm512_loadu_ps(xs + 16 * k);
          pq = _mm512_fmadd_ps(Cvt16xU8(v), xv, pq);
          px = _mm512_add_ps(px, xv);
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d * static_cast<float>(sc)), pq, acc);
        accm = _mm512_fmadd_ps(_mm512_set1_ps(dmin * static_cast<float>(m)), px, accm);
      }
    }
  }
  return _mm512_reduce_add_ps(_mm512_sub_ps(acc, accm));
}

float DotQ6_K(const uint8_t* row, const float* x, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
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
        __m512 lo = _mm512_mul_ps(Cvt16xI8(_mm256_castsi256_si128(v)), _mm512_loadu_ps(xb + 32 * j));
        __m512 hi = _mm512_mul_ps(Cvt16xI8(_mm256_extracti128_si256(v, 1)), _mm512_loadu_ps(xb + 32 * j + 16));
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d * static_cast<float>(sc[2 * j])), lo, acc);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d * static_cast<float>(sc[2 * j + 1])), hi, acc);
      }
    }
  }
  return _mm512_reduce_add_ps(acc);
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
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void AddF32(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

float DotRow(GgmlType type, const uint8_t* row, const float* x, int64_t n) {
  switch (type) {
    case GgmlType::kF32:
      return DotF32(reinterpret_cast<const float*>(row), x, n);
#ifdef CAIRN_AVX512
    case GgmlType::kF16: return DotF16(row, x, n);
    case GgmlType::kQ8_0: return DotQ8_0(row, x, n);
    case GgmlType::kQ4_0: return DotQ4_0(row, x, n);
    case GgmlType::kQ4_K: return DotQxK<false>(row, x, n);
    case GgmlType::kQ5_K: return DotQxK<true>(row, x, n);
    case GgmlType::kQ6_K: return DotQ6_K(row, x, n);
#endif
    default:
      return DotRowGeneric(type, row, x, n);
  }
}

}  // namespace cairn
