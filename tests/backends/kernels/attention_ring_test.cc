// The attention kernel's optional per-query first row (kv_begin) and ring
// addressing (kv_wrap), which the sliding-window family uses to read its
// caches in place. Both must give exactly what the plain window mask gives
// over rows in position order: the same scores in the same order.
#include <cstdint>
#include <vector>

#include "backends/kernels/attention.h"
#include "backends/kernels/thread_pool.h"
#include "gtest/gtest.h"

namespace cairn {
namespace {

std::vector<float> Random(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (float& f : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    f = static_cast<float>(x >> 40) / static_cast<float>(1 << 24) * 4.0f - 2.0f;
  }
  return v;
}

struct Geometry {
  int n_head = 4, n_head_kv = 2, hd = 8;
  int qd() const { return n_head * hd; }
  int kd() const { return n_head_kv * hd; }
  AttentionParams Params(int window, float softcap) const {
    AttentionParams p;
    p.n_head = n_head;
    p.n_head_kv = n_head_kv;
    p.head_dim_k = hd;
    p.head_dim_v = hd;
    p.scale = 0.35f;
    p.window = window;
    p.softcap = softcap;
    return p;
  }
};

// Queries at positions start .. start + n_q - 1 over keys 0 .. start + n_q - 1
// stored in position order, the window applied by masking.
std::vector<float> Masked(const Geometry& g, int window, float softcap, int start, int n_q, const std::vector<float>& q,
                          const std::vector<float>& k, const std::vector<float>& v, ThreadPool& pool) {
  std::vector<int32_t> kv_end(n_q), q_pos(n_q), kv_pos(start + n_q);
  for (int i = 0; i < n_q; ++i) {
    kv_end[i] = start + i + 1;
    q_pos[i] = start + i;
  }
  for (int j = 0; j < start + n_q; ++j) kv_pos[j] = j;
  std::vector<float> out(static_cast<size_t>(n_q) * g.qd(), -1.0f);
  AttentionArgs a;
  a.q = q.data();
  a.q_stride = g.qd();
  a.n_q = n_q;
  a.kv_end = kv_end.data();
  a.q_pos = q_pos.data();
  a.k = k.data();
  a.k_stride = g.kd();
  a.v = v.data();
  a.v_stride = g.kd();
  a.kv_pos = kv_pos.data();
  a.n_kv = start + n_q;
  a.out = out.data();
  a.out_stride = g.qd();
  Attention(g.Params(window, softcap), a, pool);
  return out;
}

TEST(AttentionRingTest, KvBeginEqualsTheWindowMaskBitForBit) {
  ThreadPool pool(2);
  const Geometry g;
  const int start = 19, n_q = 6, n_kv = start + n_q;
  const auto q = Random(n_q * g.qd(), 1), k = Random(n_kv * g.kd(), 2), v = Random(n_kv * g.kd(), 3);
  for (int window : {1, 3, 8, 30}) {
    for (float softcap : {0.0f, 2.0f}) {
      const std::vector<float> want = Masked(g, window, softcap, start, n_q, q, k, v, pool);
      std::vector<int32_t> kv_begin(n_q), kv_end(n_q);
      for (int i = 0; i < n_q; ++i) {
        kv_end[i] = start + i + 1;
        kv_begin[i] = std::max(0, start + i + 1 - window);
      }
      std::vector<float> out(want.size(), -1.0f);
      AttentionArgs a;
      a.q = q.data();
      a.q_stride = g.qd();
      a.n_q = n_q;
      a.kv_begin = kv_begin.data();
      a.kv_end = kv_end.data();
      a.k = k.data();
      a.k_stride = g.kd();
      a.v = v.data();
      a.v_stride = g.kd();
      a.n_kv = n_kv;
      a.out = out.data();
      a.out_stride = g.qd();
      Attention(g.Params(/*window=*/0, softcap), a, pool);
      EXPECT_EQ(out, want) << "window " << window << " softcap " << softcap;
    }
  }
}

// The same keys stored in a ring of R rows (position p at p % R, stale rows
// elsewhere) and read in place.
TEST(AttentionRingTest, RingAddressingEqualsRowsInPositionOrder) {
  ThreadPool pool(2);
  const Geometry g;
  const int window = 5, n_q = 3;
  for (int ring : {7, 8, 11}) {
    for (int start : {0, 2, 6, 13, 40}) {
      const int n_kv = start + n_q;
      const auto q = Random(n_q * g.qd(), 10 + start), k = Random(n_kv * g.kd(), 20 + start),
                 v = Random(n_kv * g.kd(), 30 + start);
      const std::vector<float> want = Masked(g, window, 0.0f, start, n_q, q, k, v, pool);
      // Fill the ring with stale rows, then the positions in order (the last
      // R positions survive).
      std::vector<float> rk = Random(static_cast<size_t>(ring) * g.kd(), 99),
                         rv = Random(static_cast<size_t>(ring) * g.kd(), 98);
      for (int p = 0; p < n_kv; ++p) {
        std::copy_n(&k[p * g.kd()], g.kd(), &rk[(p % ring) * g.kd()]);
        std::copy_n(&v[p * g.kd()], g.kd(), &rv[(p % ring) * g.kd()]);
      }
      ASSERT_LE(window - 1 + n_q, ring) << "the queries' keys must all be in the ring";
      std::vector<int32_t> kv_begin(n_q), kv_end(n_q);
      for (int i = 0; i < n_q; ++i) {
        kv_end[i] = start + i + 1;
        kv_begin[i] = std::max(0, start + i + 1 - window);
      }
      std::vector<float> out(want.size(), -1.0f);
      AttentionArgs a;
      a.q = q.data();
      a.q_stride = g.qd();
      a.n_q = n_q;
      a.kv_begin = kv_begin.data();
      a.kv_end = kv_end.data();
      a.k = rk.data();
      a.k_stride = g.kd();
      a.v = rv.data();
      a.v_stride = g.kd();
      a.n_kv = n_kv;
      a.kv_wrap = ring;
      a.out = out.data();
      a.out_stride = g.qd();
      Attention(g.Params(0, 0.0f), a, pool);
      EXPECT_EQ(out, want) << "ring " << ring << " start " << start;
    }
  }
}

TEST(AttentionRingTest, AQueryWithAnEmptyRangeGetsZeros) {
  ThreadPool pool(1);
  const Geometry g;
  const auto q = Random(g.qd(), 5), k = Random(4 * g.kd(), 6), v = Random(4 * g.kd(), 7);
  const int32_t begin[] = {3}, end[] = {3};
  std::vector<float> out(g.qd(), -1.0f);
  AttentionArgs a;
  a.q = q.data();
  a.q_stride = g.qd();
  a.n_q = 1;
  a.kv_begin = begin;
  a.kv_end = end;
  a.k = k.data();
  a.k_stride = g.kd();
  a.v = v.data();
  a.v_stride = g.kd();
  a.n_kv = 4;
  a.out = out.data();
  a.out_stride = g.qd();
  Attention(g.Params(0, 0.0f), a, pool);
  EXPECT_EQ(out, std::vector<float>(g.qd(), 0.0f));
}

}  // namespace
}  // namespace cairn
