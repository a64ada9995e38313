// Q8_0 and Q4_0 weights times q8_0 activations in plain C++ (any CPU), the
// activation quantizer every ISA shares, and the family's kernel list.
#include <cmath>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "backends/kernels/quant_dot_internal.h"
#include "backends/model/dequant.h"

namespace cairn {

size_t Q8ActivationRowBytes(int64_t n) {
  const size_t bytes = static_cast<size_t>(n / kQ8BlockElems) * (4 + 4 + kQ8BlockElems);
  return (bytes + 63) & ~size_t{63};
}

namespace {

// One block of 32: scale = max |x| / 127, q = x / scale rounded to nearest.
[[maybe_unused]] void QuantizeBlock(const float* xb, float* d, int32_t* sum, int8_t* q) {
  float amax = 0.0f;
  for (int64_t i = 0; i < kQ8BlockElems; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
  const float scale = amax / 127.0f;
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  int32_t s = 0;
  for (int64_t i = 0; i < kQ8BlockElems; ++i) {
    const float v = xb[i] * inv;
    // |v| <= 127 up to rounding for finite input; anything else becomes 0
    // here. An inf shows up through the scale (inf); a NaN does not: fmax
    // skips it, so the block keeps a finite scale and the NaN counts as 0.
    const int32_t qi = std::fabs(v) <= 127.5f ? static_cast<int32_t>(std::nearbyint(v)) : 0;
    q[i] = static_cast<int8_t>(qi);
    s += qi;
  }
  *d = scale;
  *sum = s;
}

#if defined(__AVX2__)
// QuantizeBlock 8 lanes at a time (compiled, its loops are scalar code that
// calls fmaxf: 6% of a Q8_0 prompt's time). The same values bit for bit:
// vmaxps keeps the running maximum where an element is NaN, as fmax does,
// and the maximum of non-NaN values does not depend on the order; x * inv, the 127.5 test and vroundps in the
// current rounding mode (nearbyint) are the scalar operations lane by lane;
// |q| <= 127 (|x| <= amax), so the saturating packs truncate nothing.
void QuantizeBlockAvx2(const float* xb, float* d, int32_t* sum, int8_t* q) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 x[4];
  __m256 m = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    x[k] = _mm256_loadu_ps(xb + 8 * k);
    m = _mm256_max_ps(_mm256_andnot_ps(sign, x[k]), m);
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
  const float amax = _mm_cvtss_f32(m4);
  const float scale = amax / 127.0f;
  const __m256 inv = _mm256_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
  __m256i qi[4];
  __m256i s = _mm256_setzero_si256();
  for (int k = 0; k < 4; ++k) {
    const __m256 v = _mm256_mul_ps(x[k], inv);
    const __m256 keep = _mm256_cmp_ps(_mm256_andnot_ps(sign, v), _mm256_set1_ps(127.5f), _CMP_LE_OQ);
    const __m256i r = _mm256_cvttps_epi32(_mm256_round_ps(v, _MM_FROUND_CUR_DIRECTION | _MM_FROUND_NO_EXC));
    qi[k] = _mm256_and_si256(r, _mm256_castps_si256(keep));
    s = _mm256_add_epi32(s, qi[k]);
  }
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
  *d = scale;
  *sum = _mm_cvtsi128_si32(s4);
}
#endif

}  // namespace

void QuantizeQ8Activations(const float* x, int64_t n, uint8_t* qx) {
  const int64_t nb = n / kQ8BlockElems;
  float* d = reinterpret_cast<float*>(qx);
  int32_t* sum = reinterpret_cast<int32_t*>(qx + 4 * nb);
  int8_t* q = reinterpret_cast<int8_t*>(qx + 8 * nb);
  for (int64_t b = 0; b < nb; ++b) {
#if defined(__AVX2__)
    QuantizeBlockAvx2(x + b * kQ8BlockElems, d + b, sum + b, q + b * kQ8BlockElems);
#else
    QuantizeBlock(x + b * kQ8BlockElems, d + b, sum + b, q + b * kQ8BlockElems);
#endif
  }
  // The padding is part of the row: keep it defined.
  const size_t used = static_cast<size_t>(nb) * (8 + kQ8BlockElems);
  std::memset(qx + used, 0, Q8ActivationRowBytes(n) - used);
}

namespace {

// Block b of weight row w: the integer dot with activation block b, before
// scaling (Q4_0's stored nibbles are value + 8).
inline int32_t IntDotQ8_0(const uint8_t* wb, const int8_t* q, int32_t /*sum*/) {
  const int8_t* wq = reinterpret_cast<const int8_t*>(wb + 2);
  int32_t s = 0;
  for (int i = 0; i < 32; ++i) s += static_cast<int32_t>(wq[i]) * q[i];
  return s;
}

inline int32_t IntDotQ4_0(const uint8_t* wb, const int8_t* q, int32_t sum) {
  const uint8_t* nib = wb + 2;
  int32_t s = 0;
  for (int i = 0; i < 16; ++i) {
    s += static_cast<int32_t>(nib[i] & 0x0F) * q[i] + static_cast<int32_t>(nib[i] >> 4) * q[i + 16];
  }
  return s - 8 * sum;
}

inline float WeightScale(const uint8_t* wb) {
  uint16_t h;
  std::memcpy(&h, wb, 2);
  return Fp16ToFp32(h);
}

template <int32_t (*IntDot)(const uint8_t*, const int8_t*, int32_t), int64_t kBlockBytes>
void Dot(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
         int64_t n, float* y, int64_t ldy) {
  const int64_t nb = n / kQ8BlockElems;
  // Rows in groups of 4 against every token: the 4 rows stay in L1 while
  // the tokens pass.
  for (int64_t r0 = 0; r0 < n_rows; r0 += 4) {
    const int64_t nr = n_rows - r0 < 4 ? n_rows - r0 : 4;
    for (int64_t t = 0; t < n_tokens; ++t) {
      const Q8ActivationRow a = ViewQ8Activations(qx + t * qx_stride, nb);
      for (int64_t r = r0; r < r0 + nr; ++r) {
        const uint8_t* row = w + r * w_stride;
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; ++b) {
          const uint8_t* wb = row + b * kBlockBytes;
          acc += static_cast<float>(IntDot(wb, a.q + b * kQ8BlockElems, a.sum[b])) * (WeightScale(wb) * a.d[b]);
        }
        y[t * ldy + r] = acc;
      }
    }
  }
}

}  // namespace

constinit const QuantDotKernel kQ8_0Portable = {GgmlType::kQ8_0,
                                                "portable",
                                                kQ8BlockElems,
                                                &Q8ActivationRowBytes,
                                                &QuantizeQ8Activations,
                                                &Dot<&IntDotQ8_0, kQ8_0BlockBytes>,
                                                true};
constinit const QuantDotKernel kQ4_0Portable = {GgmlType::kQ4_0,
                                                "portable",
                                                kQ8BlockElems,
                                                &Q8ActivationRowBytes,
                                                &QuantizeQ8Activations,
                                                &Dot<&IntDotQ4_0, kQ4_0BlockBytes>,
                                                true};

std::vector<const QuantDotKernel*> BlockQuantKernels(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Vnni:
      return {&kQ8_0Avx512Vnni, &kQ4_0Avx512Vnni};
    case Isa::kAvx2:
      return {&kQ8_0Avx2, &kQ4_0Avx2};
    case Isa::kPortable:
      return {&kQ8_0Portable, &kQ4_0Portable};
  }
  return {};
}

}  // namespace cairn
