// Q8_0 and Q4_0 weights times q8_0 activations in plain C++ (any CPU), the
// activation quantizer every ISA shares, and the family's kernel list.
#include <cmath>
#include <cstring>

#include "backends/kernels/quant_dot_internal.h"
#include "backends/model/dequant.h"

namespace cairn {

size_t Q8ActivationRowBytes(int64_t n) {
  const size_t bytes = static_cast<size_t>(n / kQ8BlockElems) * (4 + 4 + kQ8BlockElems);
  return (bytes + 63) & ~size_t{63};
}

void QuantizeQ8Activations(const float* x, int64_t n, uint8_t* qx) {
  const int64_t nb = n / kQ8BlockElems;
  float* d = reinterpret_cast<float*>(qx);
  int32_t* sum = reinterpret_cast<int32_t*>(qx + 4 * nb);
  int8_t* q = reinterpret_cast<int8_t*>(qx + 8 * nb);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQ8BlockElems;
    float amax = 0.0f;
    for (int64_t i = 0; i < kQ8BlockElems; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float scale = amax / 127.0f;
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    int32_t s = 0;
    for (int64_t i = 0; i < kQ8BlockElems; ++i) {
      const float v = xb[i] * inv;
      // |v| <= 127 up to rounding for finite input; anything else (NaN, inf)
      // becomes 0 here and shows up through the non-finite scale.
      const int32_t qi = std::fabs(v) <= 127.5f ? static_cast<int32_t>(std::nearbyint(v)) : 0;
      q[b * kQ8BlockElems + i] = static_cast<int8_t>(qi);
      s += qi;
    }
    d[b] = scale;
    sum[b] = s;
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
