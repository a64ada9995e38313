#include "backends/kernels/delta_net.h"

#include <algorithm>
#include <cmath>

#include "backends/kernels/vec.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif
#if defined(__AVX512F__)
// GCC 12 reports its own _mm512_undefined_* placeholders inside
// _mm512_reduce_add_ps as uninitialized once inlined: a false positive.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace cairn {

void L2Normalize(const float* x, int64_t n, float eps, float* y) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::max(std::sqrt(static_cast<float>(sum)), eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
}

namespace {

int64_t KeyHead(const GatedDeltaRuleArgs& a, int64_t h) {
  return a.key_head_blocks ? h / (a.n_head_v / a.n_head_k) : h % a.n_head_k;
}

// One (value head, token) step's operands: head h's state S, the token's q
// and k (of h's key head), v, decay = exp(g), beta, and its output row.
struct HeadToken {
  float* S;
  const float* q;
  const float* k;
  const float* v;
  float decay;
  float beta;
  float* o;
};

// Calls step(HeadToken) for each value head of the slice and each token in
// order: the recurrence's order, which every form below keeps.
template <class Step>
void ForEachHeadToken(const GatedDeltaRuleArgs& a, Step&& step) {
  for (int64_t h = a.head_begin; h < a.head_end; ++h) {
    const int64_t hk = KeyHead(a, h);
    float* S = a.state + h * a.d_v * a.d_k;
    for (int64_t t = 0; t < a.n_tokens; ++t) {
      step(HeadToken{S, a.q + t * a.qk_stride + hk * a.d_k, a.k + t * a.qk_stride + hk * a.d_k,
                     a.v + t * a.v_stride + h * a.d_v, std::exp(a.g[t * a.gb_stride + h]), a.beta[t * a.gb_stride + h],
                     a.out + t * a.out_stride + h * a.d_v});
    }
  }
}

// The portable form: one state row at a time through the vector primitives.
void RuleGeneric(const GatedDeltaRuleArgs& a) {
  ForEachHeadToken(a, [&a](const HeadToken& x) {
    // Each state row j (one value component) evolves independently of the
    // others within a token, so the four steps run row by row while the
    // row is in L1.
    for (int64_t j = 0; j < a.d_v; ++j) {
      float* row = x.S + j * a.d_k;
      for (int64_t i = 0; i < a.d_k; ++i) row[i] *= x.decay;
      const float delta = (x.v[j] - DotF32(row, x.k, a.d_k)) * x.beta;
      AxpyF32(delta, x.k, row, a.d_k);
      x.o[j] = DotF32(row, x.q, a.d_k) * a.scale;
    }
  });
}

#if defined(__AVX512F__)
// d_k = 16 * NV: q and k of the token stay in registers for all d_v rows,
// and each state row is loaded once and stored once per token (the
// recurrence is bound by these row passes, not by arithmetic).
template <int NV>
void RuleAvx512(const GatedDeltaRuleArgs& a) {
  ForEachHeadToken(a, [&a](const HeadToken& x) {
    const __m512 decay = _mm512_set1_ps(x.decay);
    __m512 qv[NV], kv[NV];
    for (int u = 0; u < NV; ++u) {
      qv[u] = _mm512_loadu_ps(x.q + 16 * u);
      kv[u] = _mm512_loadu_ps(x.k + 16 * u);
    }
    for (int64_t j = 0; j < a.d_v; ++j) {
      float* row = x.S + j * a.d_k;
      __m512 r[NV];
      __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
      for (int u = 0; u < NV; ++u) {
        r[u] = _mm512_mul_ps(_mm512_loadu_ps(row + 16 * u), decay);
        if (u % 2 == 0) {
          acc0 = _mm512_fmadd_ps(r[u], kv[u], acc0);
        } else {
          acc1 = _mm512_fmadd_ps(r[u], kv[u], acc1);
        }
      }
      const float sk = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
      const __m512 delta = _mm512_set1_ps((x.v[j] - sk) * x.beta);
      acc0 = _mm512_setzero_ps();
      acc1 = _mm512_setzero_ps();
      for (int u = 0; u < NV; ++u) {
        r[u] = _mm512_fmadd_ps(delta, kv[u], r[u]);
        _mm512_storeu_ps(row + 16 * u, r[u]);
        if (u % 2 == 0) {
          acc0 = _mm512_fmadd_ps(r[u], qv[u], acc0);
        } else {
          acc1 = _mm512_fmadd_ps(r[u], qv[u], acc1);
        }
      }
      x.o[j] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) * a.scale;
    }
  });
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
inline float Sum8(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 v = _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// d_k a multiple of 32 on AVX2 (16 registers hold neither a 128-wide row
// nor q and k): each state row makes two passes while it is in L1, decay
// and S k, then the update and S q, with four accumulators per dot so that
// the FMA latency does not bind; the generic form calls out to a dot and an
// axpy per pass, which are not vectorized on an AVX2 build.
void RuleAvx2(const GatedDeltaRuleArgs& a) {
  ForEachHeadToken(a, [&a](const HeadToken& x) {
    const __m256 decay = _mm256_set1_ps(x.decay);
    for (int64_t j = 0; j < a.d_v; ++j) {
      float* row = x.S + j * a.d_k;
      __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      for (int64_t i = 0; i < a.d_k; i += 32) {
        for (int u = 0; u < 4; ++u) {
          const __m256 r = _mm256_mul_ps(_mm256_loadu_ps(row + i + 8 * u), decay);
          _mm256_storeu_ps(row + i + 8 * u, r);
          acc[u] = _mm256_fmadd_ps(r, _mm256_loadu_ps(x.k + i + 8 * u), acc[u]);
        }
      }
      const __m256 delta = _mm256_set1_ps((x.v[j] - Sum8(acc[0], acc[1], acc[2], acc[3])) * x.beta);
      for (__m256& v : acc) v = _mm256_setzero_ps();
      for (int64_t i = 0; i < a.d_k; i += 32) {
        for (int u = 0; u < 4; ++u) {
          const __m256 r = _mm256_fmadd_ps(delta, _mm256_loadu_ps(x.k + i + 8 * u), _mm256_loadu_ps(row + i + 8 * u));
          _mm256_storeu_ps(row + i + 8 * u, r);
          acc[u] = _mm256_fmadd_ps(r, _mm256_loadu_ps(x.q + i + 8 * u), acc[u]);
        }
      }
      x.o[j] = Sum8(acc[0], acc[1], acc[2], acc[3]) * a.scale;
    }
  });
}
#endif

}  // namespace

void GatedDeltaRule(const GatedDeltaRuleArgs& a) {
#if defined(__AVX512F__)
  switch (a.d_k) {
    case 16:
      return RuleAvx512<1>(a);
    case 32:
      return RuleAvx512<2>(a);
    case 64:
      return RuleAvx512<4>(a);
    case 128:
      return RuleAvx512<8>(a);
    default:
      break;
  }
#elif defined(__AVX2__) && defined(__FMA__)
  if (a.d_k % 32 == 0) return RuleAvx2(a);
#endif
  RuleGeneric(a);
}

}  // namespace cairn
