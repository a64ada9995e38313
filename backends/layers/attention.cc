#include "backends/layers/attention.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "backends/kernels/attention.h"
#include "backends/kernels/norm.h"
#include "backends/kernels/vec.h"
#include "backends/layers/arch_model.h"

namespace cairn {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

absl::StatusOr<std::vector<float>> LoadByPresence(const ModelLoader& ld, const std::string& name, int64_t n,
                                                  Presence presence) {
  switch (presence) {
    case Presence::kAbsent:
      return std::vector<float>();
    case Presence::kOptional:
      return ld.OptionalVector(name, n);
    case Presence::kRequired:
      break;
  }
  return ld.Vector(name, n);
}

// The per-call arrays of one segment's attention.
struct SegmentQueries {
  std::vector<int32_t> kv_end, q_pos, kv_begin, kv_pos;
};

// Attention of segment `s` over a full cache (row j of its memory at row
// j of `kv`): queries `rows` (pass rows) from q, output rows from `out_row`.
void AttendFullCache(const AttentionParams& ap, ForwardPass& pass, size_t s, const KvRows& kv,
                     std::span<const int64_t> rows, const float* q, int64_t q_stride, float* out, int64_t o_dim,
                     SegmentQueries& sq) {
  const int64_t n = static_cast<int64_t>(rows.size());
  const std::span<const int64_t> kv_row = pass.kv_rows();
  const std::span<const int32_t> pos = pass.positions();
  sq.kv_end.resize(n);
  sq.q_pos.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    sq.kv_end[i] = static_cast<int32_t>(kv_row[rows[i]] + 1);
    sq.q_pos[i] = pos[rows[i]];
  }
  AttentionArgs aa;
  aa.q = q;
  aa.q_stride = q_stride;
  aa.n_q = n;
  aa.kv_end = sq.kv_end.data();
  aa.q_pos = sq.q_pos.data();
  aa.k = kv.k;
  aa.k_stride = kv.k_stride;
  aa.v = kv.v;
  aa.v_stride = kv.v_stride;
  aa.n_kv = kv_row[pass.first_row(s) + pass.segment_rows(s) - 1] + 1;
  aa.out = out;
  aa.out_stride = o_dim;
  Attention(ap, aa, pass.pool());
}

// Attention of segment `s` of a sliding-window layer over its ring: stores
// the segment's new K/V rows in the ring and attends every row of it.
void AttendRing(AttentionParams ap, int32_t window, ForwardPass& pass, size_t s, const KvRows& kv, const float* q,
                int64_t q_dim, const float* k, const float* v, float* out, int64_t o_dim, SegmentQueries& sq) {
  const int64_t k_dim = kv.k_stride, v_dim = kv.v_stride;
  const int32_t W = window;
  const Pos R = kv.ring;
  const Pos p0 = pass.start_pos(s);
  const int64_t first = pass.first_row(s);
  const int64_t n = pass.segment_rows(s);
  auto ring_k = [&](Pos p) { return kv.k + static_cast<int64_t>(p % R) * k_dim; };
  auto ring_v = [&](Pos p) { return kv.v + static_cast<int64_t>(p % R) * v_dim; };
  AttentionArgs aa;
  aa.q = q + first * q_dim;
  aa.q_stride = q_dim;
  aa.n_q = n;
  aa.q_pos = pass.positions().data() + first;
  aa.out = out + first * o_dim;
  aa.out_stride = o_dim;
  sq.kv_end.resize(n);
  sq.kv_begin.resize(n);
  // The run needs the history p0 - h .. p0 - 1 (h <= W - 1, all held:
  // Truncate and the ring size guarantee it) and its new rows.
  const int64_t h = std::min<int64_t>(W - 1, p0);
  if (n <= R - h) {
    // The new rows fit in the ring without overwriting that history
    // (position p0 + i replaces p0 + i - R < p0 - h): write them first and
    // attend over the ring in place, logical row = position.
    for (int64_t i = 0; i < n; ++i) {
      const Pos p = static_cast<Pos>(p0 + i);
      std::copy_n(&k[(first + i) * k_dim], k_dim, ring_k(p));
      std::copy_n(&v[(first + i) * v_dim], v_dim, ring_v(p));
    }
    for (int64_t i = 0; i < n; ++i) {
      sq.kv_end[i] = static_cast<int32_t>(p0 + i + 1);
      sq.kv_begin[i] = static_cast<int32_t>(std::max<int64_t>(0, p0 + i + 1 - W));  // keys p - W + 1 .. p
    }
    aa.kv_end = sq.kv_end.data();
    aa.kv_begin = sq.kv_begin.data();
    aa.k = kv.k;
    aa.k_stride = k_dim;
    aa.v = kv.v;
    aa.v_stride = v_dim;
    aa.n_kv = p0 + n;
    aa.kv_wrap = R;
    ap.window = 0;  // kv_begin is the window
    Attention(ap, aa, pass.pool());
    return;
  }
  // A run longer than the ring's slack: gather the history and the new rows
  // in position order, attend, then keep the last R rows.
  const int64_t rows = h + n;
  std::vector<float> ctx_k(static_cast<size_t>(rows * k_dim)), ctx_v(static_cast<size_t>(rows * v_dim));
  sq.kv_pos.resize(rows);
  for (int64_t j = 0; j < h; ++j) {
    const Pos p = static_cast<Pos>(p0 - h + j);
    std::copy_n(ring_k(p), k_dim, &ctx_k[j * k_dim]);
    std::copy_n(ring_v(p), v_dim, &ctx_v[j * v_dim]);
  }
  std::copy_n(&k[first * k_dim], n * k_dim, &ctx_k[h * k_dim]);
  std::copy_n(&v[first * v_dim], n * v_dim, &ctx_v[h * v_dim]);
  for (int64_t j = 0; j < rows; ++j) sq.kv_pos[j] = static_cast<int32_t>(p0 - h + j);
  for (int64_t i = 0; i < n; ++i) {
    sq.kv_end[i] = static_cast<int32_t>(h + i + 1);
    sq.kv_begin[i] = static_cast<int32_t>(std::max<int64_t>(0, h + i + 1 - W));  // keys p - W + 1 .. p
  }
  aa.kv_end = sq.kv_end.data();
  aa.kv_begin = sq.kv_begin.data();
  aa.k = ctx_k.data();
  aa.k_stride = k_dim;
  aa.v = ctx_v.data();
  aa.v_stride = v_dim;
  aa.kv_pos = sq.kv_pos.data();
  aa.n_kv = rows;
  ap.window = W;
  Attention(ap, aa, pass.pool());
  // Only the last R positions fit in the ring; older ones of a long run
  // were needed by this run alone.
  for (int64_t i = std::max<int64_t>(0, n - R); i < n; ++i) {
    const Pos p = static_cast<Pos>(p0 + i);
    std::copy_n(&k[(first + i) * k_dim], k_dim, ring_k(p));
    std::copy_n(&v[(first + i) * v_dim], v_dim, ring_v(p));
  }
}

}  // namespace

AttentionBlock DecoderAttention(const DecoderHParams& hp, int32_t layer, double scale) {
  AttentionBlock a;
  a.n_head = static_cast<int32_t>(hp.n_heads[layer]);
  a.n_head_kv = static_cast<int32_t>(hp.n_head_kv[layer]);
  a.head_dim_k = hp.head_dim_k;
  a.head_dim_v = hp.head_dim_v;
  a.scale = scale != 0.0 ? static_cast<float>(scale) : 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
  a.norm_eps = hp.eps;
  return a;
}

absl::Status LoadAttention(const ModelLoader& ld, int layer, int64_t n_embd, const AttentionTensors& tensors,
                           AttentionBlock& b) {
  auto name = [layer](const char* n) { return BlockTensor(layer, n); };
  const int64_t q_rows = b.q_dim() * (b.gated ? 2 : 1);
  CAIRN_LOAD_ASSIGN(b.wq, ld.Matrix(name("attn_q.weight"), n_embd, q_rows));
  CAIRN_LOAD_ASSIGN(b.wk, ld.Matrix(name("attn_k.weight"), n_embd, b.k_dim()));
  CAIRN_LOAD_ASSIGN(b.wv, ld.Matrix(name("attn_v.weight"), n_embd, b.v_dim()));
  CAIRN_LOAD_ASSIGN(b.wo, ld.Matrix(name("attn_output.weight"), b.o_dim(), n_embd));
  CAIRN_LOAD_ASSIGN(b.bq, LoadByPresence(ld, name("attn_q.bias"), q_rows, tensors.qkv_bias));
  CAIRN_LOAD_ASSIGN(b.bk, LoadByPresence(ld, name("attn_k.bias"), b.k_dim(), tensors.qkv_bias));
  CAIRN_LOAD_ASSIGN(b.bv, LoadByPresence(ld, name("attn_v.bias"), b.v_dim(), tensors.qkv_bias));
  CAIRN_LOAD_ASSIGN(b.bo, LoadByPresence(ld, name("attn_output.bias"), n_embd, tensors.out_bias));
  CAIRN_LOAD_ASSIGN(b.q_norm, LoadByPresence(ld, name("attn_q_norm.weight"), b.head_dim_k, tensors.qk_norm));
  CAIRN_LOAD_ASSIGN(b.k_norm, LoadByPresence(ld, name("attn_k_norm.weight"), b.head_dim_k, tensors.qk_norm));
  CAIRN_LOAD_ASSIGN(b.sinks, LoadByPresence(ld, name("attn_sinks.weight"), b.n_head, tensors.sinks));
  return absl::OkStatus();
}

namespace {

// The work buffers of one layer's call.
struct Projections {
  float* qf;  // [rows][q_full]: queries (and gates)
  float* q;   // [rows][q_dim]: queries alone (qf unless gated)
  float* k;
  float* v;
};

// Projects every row of xn to queries, keys and values, adds biases, applies
// the per-head norms and RoPE, and stores each row's K/V in its segment's
// full cache (rings are written per segment, by AttendRing).
void ProjectRows(const AttentionBlock& b, ForwardPass& pass, const float* xn, const std::vector<KvRows>& seg_kv,
                 const Projections& p) {
  ThreadPool& pool = pass.pool();
  const int64_t T = pass.n_all_rows();
  const int64_t hd = b.head_dim_k;
  const int64_t q_dim = b.q_dim(), k_dim = b.k_dim(), v_dim = b.v_dim();
  const int64_t q_full = b.gated ? 2 * q_dim : q_dim;
  MatMul(b.wq, xn, T, p.qf, pool, pass.precision());
  MatMul(b.wk, xn, T, p.k, pool, pass.precision());
  MatMul(b.wv, xn, T, p.v, pool, pass.precision());
  auto add_bias = [&](float* y, const std::vector<float>& bias, int64_t width) {
    if (bias.empty()) return;
    pool.ForEach(T, [&](int64_t i) { AddF32(&y[i * width], bias.data(), &y[i * width], width); });
  };
  add_bias(p.qf, b.bq, q_full);
  add_bias(p.k, b.bk, k_dim);
  add_bias(p.v, b.bv, v_dim);

  const float* rope_table = b.rope != nullptr ? pass.RopeTable(*b.rope) : nullptr;
  const int32_t n_dims = b.rope != nullptr ? b.rope->params.n_dims : 0;
  const std::span<const int64_t> kv_row = pass.kv_rows();
  std::vector<int32_t> row_segment(T);
  for (size_t s = 0; s < pass.n_segments(); ++s) {
    std::fill_n(row_segment.begin() + pass.first_row(s), pass.segment_rows(s), static_cast<int32_t>(s));
  }
  pool.ForEach(T, [&](int64_t i) {
    float* qi = &p.q[i * q_dim];
    if (b.gated) {
      // Per head: [query (hd) | gate (hd)]; the gate waits in qf.
      for (int32_t h = 0; h < b.n_head; ++h) std::copy_n(&p.qf[i * q_full + 2 * h * hd], hd, qi + h * hd);
    }
    float* ki = &p.k[i * k_dim];
    if (!b.q_norm.empty()) RmsNormRows(qi, b.q_norm.data(), b.n_head, hd, hd, b.norm_eps, qi);
    if (!b.k_norm.empty()) RmsNormRows(ki, b.k_norm.data(), b.n_head_kv, hd, hd, b.norm_eps, ki);
    if (rope_table != nullptr) {
      RopeApply(b.rope->params, &rope_table[i * n_dims], qi, b.n_head, static_cast<int32_t>(hd));
      RopeApply(b.rope->params, &rope_table[i * n_dims], ki, b.n_head_kv, static_cast<int32_t>(hd));
    }
    const KvRows& kv = seg_kv[row_segment[i]];
    if (kv.ring == 0) {
      std::copy_n(ki, k_dim, kv.k + kv_row[i] * kv.k_stride);
      std::copy_n(&p.v[i * v_dim], v_dim, kv.v + kv_row[i] * kv.v_stride);
    }
  });
}

}  // namespace

void AttentionForward(const AttentionBlock& b, ForwardPass& pass, int32_t slot, const float* xn, float* out,
                      QueryRows rows) {
  ThreadPool& pool = pass.pool();
  WorkBuffers& buf = pass.buffers();
  const int64_t T = pass.n_all_rows();
  const int64_t E = pass.width();
  const int64_t hd = b.head_dim_k;
  const int64_t q_dim = b.q_dim(), k_dim = b.k_dim(), v_dim = b.v_dim(), o_dim = b.o_dim();
  const int64_t q_full = b.gated ? 2 * q_dim : q_dim;
  Projections p;
  p.qf = buf.Get(WorkBuffers::kQueryFull, static_cast<size_t>(T * q_full));
  p.q = b.gated ? buf.Get(WorkBuffers::kQuery, static_cast<size_t>(T * q_dim)) : p.qf;
  p.k = buf.Get(WorkBuffers::kKey, static_cast<size_t>(T * k_dim));
  p.v = buf.Get(WorkBuffers::kValue, static_cast<size_t>(T * v_dim));
  float* attn = buf.Get(WorkBuffers::kAttention, static_cast<size_t>(T * o_dim));
  // Per segment, where this layer's K/V rows live.
  std::vector<KvRows> seg_kv(pass.n_segments());
  for (size_t s = 0; s < seg_kv.size(); ++s) seg_kv[s] = pass.memory(s).kv(slot);
  ProjectRows(b, pass, xn, seg_kv, p);

  AttentionParams ap;
  ap.n_head = b.n_head;
  ap.n_head_kv = b.n_head_kv;
  ap.head_dim_k = b.head_dim_k;
  ap.head_dim_v = b.head_dim_v;
  ap.scale = b.scale;
  ap.softcap = b.softcap;
  ap.sinks = b.sinks.empty() ? nullptr : b.sinks.data();
  const bool wanted_only = rows == QueryRows::kWanted;
  const std::span<const int64_t> wanted = pass.wanted_rows();
  SegmentQueries sq;
  std::vector<int64_t> seg_rows;
  std::vector<float> q_rows;
  for (size_t s = 0; s < pass.n_segments(); ++s) {
    if (seg_kv[s].ring > 0) {
      AttendRing(ap, b.window, pass, s, seg_kv[s], p.q, q_dim, p.k, p.v, attn, o_dim, sq);
      continue;
    }
    const int64_t first = pass.first_row(s);
    if (!wanted_only) {
      seg_rows.resize(pass.segment_rows(s));
      for (int64_t i = 0; i < pass.segment_rows(s); ++i) seg_rows[i] = first + i;
      AttendFullCache(ap, pass, s, seg_kv[s], seg_rows, &p.q[first * q_dim], q_dim, &attn[first * o_dim], o_dim, sq);
      continue;
    }
    const int64_t w0 = pass.wanted_begin(s), w1 = pass.wanted_begin(s + 1);
    if (w0 == w1) continue;
    const std::span<const int64_t> rows_s = wanted.subspan(w0, w1 - w0);
    q_rows.resize(rows_s.size() * q_dim);
    for (size_t i = 0; i < rows_s.size(); ++i) std::copy_n(&p.q[rows_s[i] * q_dim], q_dim, &q_rows[i * q_dim]);
    AttendFullCache(ap, pass, s, seg_kv[s], rows_s, q_rows.data(), q_dim, &attn[w0 * o_dim], o_dim, sq);
  }

  // Output rows: every row, or the wanted ones.
  const int64_t R = wanted_only ? static_cast<int64_t>(wanted.size()) : T;
  if (b.gated) {
    pool.ForEach(R, [&](int64_t j) {
      const int64_t row = wanted_only ? wanted[j] : j;
      for (int32_t h = 0; h < b.n_head; ++h) {
        const float* g = &p.qf[row * q_full + (2 * h + 1) * hd];
        float* o = &attn[j * o_dim + h * b.head_dim_v];
        for (int64_t d = 0; d < b.head_dim_v; ++d) o[d] *= Sigmoid(g[d]);
      }
    });
  }
  MatMul(b.wo, attn, R, out, pool, pass.precision());
  if (!b.bo.empty()) {
    pool.ForEach(R, [&](int64_t i) { AddF32(&out[i * E], b.bo.data(), &out[i * E], E); });
  }
}

}  // namespace cairn
