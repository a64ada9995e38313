// The K-quant integer dots in plain C++: the reference the vector kernels are
// tested against, and the path on CPUs without AVX2. Compiled without target
// flags beyond the project's (with CAIRN_NATIVE=OFF: baseline x86-64).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/kernels/quant_dot_kquant.h"
#include "backends/model/dequant.h"

namespace cairn {
namespace {

float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Fp16ToFp32(h);
}

size_t Q8KRowBytes(int64_t n) { return static_cast<size_t>(n / kQ8KBlockElems) * kQ8KBlockBytes; }

void QuantizeQ8K(const float* x, int64_t n, uint8_t* qx) {
  for (int64_t b = 0; b < n / kQ8KBlockElems; ++b, x += kQ8KBlockElems, qx += kQ8KBlockBytes) {
    float amax = 0;
    for (int i = 0; i < kQ8KBlockElems; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = amax > 0 ? 127.0f / amax : 0.0f;
    int8_t q[kQ8KBlockElems];
    int16_t sums[16];
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 16 * g; i < 16 * g + 16; ++i) {
        float v = x[i] * id;
        // Written so that NaN lands on a bound instead of an undefined cast.
        v = v <= 127.0f ? v : 127.0f;
        v = v >= -127.0f ? v : -127.0f;
        q[i] = static_cast<int8_t>(std::nearbyint(v));
        sum += q[i];
      }
      sums[g] = static_cast<int16_t>(sum);
    }
    std::memcpy(qx, &d, 4);
    std::memcpy(qx + 4, q, sizeof q);
    std::memcpy(qx + 4 + kQ8KBlockElems, sums, sizeof sums);
  }
}

// One weight block in the common integer form: unsigned quants u[256] and,
// per group of 16 elements, a quant scale and a min, so that the block's
// product with a q8_K block (scale dx, quants q, sums s) is
//   dx * (d * sum_g scale[g] * (u . q)_g  -  dmin * sum_g min[g] * s[g]).
struct Unpacked {
  uint8_t u[256];
  int32_t scale[16];
  int32_t min[16];
  float d, dmin;
};

// Q4_K / Q5_K: eight 6-bit scales and eight 6-bit mins in 12 bytes.
void ScalesMinsK4(const uint8_t* p, int32_t* sc, int32_t* m) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      sc[j] = p[j] & 63;
      m[j] = p[j + 4] & 63;
    } else {
      sc[j] = (p[j + 4] & 0xF) | ((p[j - 4] >> 6) << 4);
      m[j] = (p[j + 4] >> 4) | ((p[j] >> 6) << 4);
    }
  }
}

// Q4_K (144 bytes): d, dmin (fp16), scales[12], qs[128]; 64-element chunk c
// takes the low nibbles of qs[32c..32c+31] then their high nibbles.
void UnpackQ4_K(const uint8_t* b, Unpacked* out) {
  out->d = Half(b);
  out->dmin = Half(b + 2);
  int32_t sc[8], m[8];
  ScalesMinsK4(b + 4, sc, m);
  const uint8_t* qs = b + 16;
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      out->u[64 * c + l] = qs[32 * c + l] & 0xF;
      out->u[64 * c + 32 + l] = qs[32 * c + l] >> 4;
    }
  }
  for (int g = 0; g < 16; ++g) {
    out->scale[g] = sc[g / 2];
    out->min[g] = m[g / 2];
  }
}

// Q5_K (176 bytes): as Q4_K with qh[32] after the scales; bit 2c of qh[l]
// is bit 4 of element 64c + l, bit 2c + 1 that of element 64c + 32 + l.
void UnpackQ5_K(const uint8_t* b, Unpacked* out) {
  out->d = Half(b);
  out->dmin = Half(b + 2);
  int32_t sc[8], m[8];
  ScalesMinsK4(b + 4, sc, m);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      out->u[64 * c + l] = static_cast<uint8_t>((qs[32 * c + l] & 0xF) | (((qh[l] >> (2 * c)) & 1) << 4));
      out->u[64 * c + 32 + l] = static_cast<uint8_t>((qs[32 * c + l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4));
    }
  }
  for (int g = 0; g < 16; ++g) {
    out->scale[g] = sc[g / 2];
    out->min[g] = m[g / 2];
  }
}

// Q6_K (210 bytes): ql[128], qh[64], int8 scales[16], d (fp16); values are
// 6-bit u - 32 with one scale per 16 elements. The offset becomes a min of
// 32 * scale at the block scale d.
void UnpackQ6_K(const uint8_t* b, Unpacked* out) {
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  out->d = Half(b + 208);
  out->dmin = out->d;
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b + 64 * h;
    const uint8_t* qh = b + 128 + 32 * h;
    uint8_t* u = out->u + 128 * h;
    for (int l = 0; l < 32; ++l) {
      u[l] = static_cast<uint8_t>((ql[l] & 0xF) | ((qh[l] & 3) << 4));
      u[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
      u[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      u[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
  for (int g = 0; g < 16; ++g) {
    out->scale[g] = sc[g];
    out->min[g] = 32 * sc[g];
  }
}

template <void (*Unpack)(const uint8_t*, Unpacked*), size_t kBlockBytes>
void DotK(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* qx, size_t qx_stride, int64_t n_tokens,
          int64_t n, float* y, int64_t ldy) {
  const int64_t nb = n / kQ8KBlockElems;
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t t = 0; t < n_tokens; ++t) y[t * ldy + r] = 0;
    for (int64_t b = 0; b < nb; ++b) {
      Unpacked k;
      Unpack(w + r * w_stride + b * kBlockBytes, &k);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const uint8_t* xb = qx + t * qx_stride + b * kQ8KBlockBytes;
        float dx;
        std::memcpy(&dx, xb, 4);
        const int8_t* q = reinterpret_cast<const int8_t*>(xb + 4);
        int16_t sums[16];
        std::memcpy(sums, xb + 4 + kQ8KBlockElems, sizeof sums);
        int32_t dot = 0, mins = 0;
        for (int g = 0; g < 16; ++g) {
          int32_t part = 0;
          for (int i = 16 * g; i < 16 * g + 16; ++i) part += k.u[i] * q[i];
          dot += k.scale[g] * part;
          mins += k.min[g] * sums[g];
        }
        y[t * ldy + r] = AccumulateBlock(y[t * ldy + r], dot, mins, k.d * dx, k.dmin * dx);
      }
    }
  }
}

}  // namespace

constinit const QuantDotKernel kQ4_KPortable = {
    GgmlType::kQ4_K, "portable", kQ8KBlockElems, Q8KRowBytes, QuantizeQ8K, DotK<UnpackQ4_K, 144>, true};
constinit const QuantDotKernel kQ5_KPortable = {
    GgmlType::kQ5_K, "portable", kQ8KBlockElems, Q8KRowBytes, QuantizeQ8K, DotK<UnpackQ5_K, 176>, true};
constinit const QuantDotKernel kQ6_KPortable = {
    GgmlType::kQ6_K, "portable", kQ8KBlockElems, Q8KRowBytes, QuantizeQ8K, DotK<UnpackQ6_K, 210>, true};

// Here, in the file built for the baseline ISA: std::vector's code must not
// come from an AVX-512 file (the linker keeps one copy of each template).
std::vector<const QuantDotKernel*> KQuantKernels(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Vnni:
      return {&kQ4_KAvx512Vnni, &kQ5_KAvx512Vnni, &kQ6_KAvx512Vnni};
    case Isa::kAvx2:
      return {&kQ4_KAvx2, &kQ5_KAvx2, &kQ6_KAvx2};
    case Isa::kPortable:
      return {&kQ4_KPortable, &kQ5_KPortable, &kQ6_KPortable};
  }
  return {};
}

}  // namespace cairn
