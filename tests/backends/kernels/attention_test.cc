// Batch invariance of the attention kernel: a query's output bits are a
// function of its own inputs only (attention.h). Each query of a causal run
// is computed alone (n_q = 1) and then inside calls of 5, 8, 37 and 300
// queries, on one, two and three threads (with more threads than KV heads,
// a lone query's heads take separate work items instead of sharing one:
// attention.cc), with the hidden rows masked by the window or skipped
// through kv_begin, and with the rows in position order or read in place
// from a rotated ring (kv_wrap): every output must equal the alone one bit
// for bit. Run under each CAIRN_ISA the CPU has (tests/.../CMakeLists.txt):
// the guarantee holds within whichever tiles the process picks.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/kernels/attention.h"
#include "backends/kernels/thread_pool.h"
#include "gtest/gtest.h"

namespace cairn {
namespace {

// Values in [-2, 2): scores spread enough that the softmax weights differ.
std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<float> v(n);
  std::generate(v.begin(), v.end(), [&] { return uniform(rng); });
  return v;
}

// How the same visible rows reach the kernel.
enum class Layout {
  kMasked,   // rows in position order from row 0, the window masks the hidden ones
  kSkipped,  // rows in position order, kv_begin skips the ones the window hides
  kRing,     // a ring of all n_kv rows rotated by kRotation, read through kv_wrap and kv_begin
};
constexpr int kRotation = 7;

struct Case {
  int head_dim_k, head_dim_v, window;
  float softcap;
  bool sinks;
};

// A causal run: n_q queries at positions start .. start + n_q - 1 over the
// rows of positions 0 .. start + n_q - 1, GQA heads (4 query heads, 2 kv).
class CausalRun {
 public:
  static constexpr int kHeads = 4, kKvHeads = 2, kStart = 40, kQueries = 300, kRows = kStart + kQueries;

  explicit CausalRun(const Case& c) : c_(c) {
    q_ = Random(static_cast<size_t>(kQueries) * qd(), 1);
    k_ = Random(static_cast<size_t>(kRows) * kd(), 2);
    v_ = Random(static_cast<size_t>(kRows) * vd(), 3);
    ring_k_.resize(k_.size());
    ring_v_.resize(v_.size());
    ring_pos_.resize(kRows);
    for (int p = 0; p < kRows; ++p) {  // logical row kRotation + p holds position p
      const int slot = (kRotation + p) % kRows;
      std::memcpy(&ring_k_[static_cast<size_t>(slot) * kd()], &k_[static_cast<size_t>(p) * kd()], kd() * sizeof(float));
      std::memcpy(&ring_v_[static_cast<size_t>(slot) * vd()], &v_[static_cast<size_t>(p) * vd()], vd() * sizeof(float));
      ring_pos_[slot] = p;
    }
    for (int p = 0; p < kRows; ++p) pos_.push_back(p);
    params_.n_head = kHeads;
    params_.n_head_kv = kKvHeads;
    params_.head_dim_k = c.head_dim_k;
    params_.head_dim_v = c.head_dim_v;
    params_.scale = 0.3f;
    params_.softcap = c.softcap;
    params_.window = c.window;
    if (c.sinks) params_.sinks = sinks_;
  }

  int qd() const { return kHeads * c_.head_dim_k; }
  int kd() const { return kKvHeads * c_.head_dim_k; }
  int vd() const { return kKvHeads * c_.head_dim_v; }
  int od() const { return kHeads * c_.head_dim_v; }

  // The outputs of all queries, computed in calls of `per_call` consecutive
  // queries (the last call takes the rest).
  std::vector<float> Outputs(Layout layout, int per_call, ThreadPool& pool) const {
    std::vector<float> out(static_cast<size_t>(kQueries) * od(), -1.0f);
    for (int i0 = 0; i0 < kQueries; i0 += per_call) {
      const int n = std::min(per_call, kQueries - i0);
      std::vector<int32_t> begin(n), end(n), q_pos(n);
      for (int i = 0; i < n; ++i) {
        const int p = kStart + i0 + i;
        q_pos[i] = p;
        const int first = layout != Layout::kMasked && c_.window > 0 ? std::max(0, p - c_.window + 1) : 0;
        const int shift = layout == Layout::kRing ? kRotation : 0;
        begin[i] = shift + first;
        end[i] = shift + p + 1;
      }
      AttentionArgs a;
      a.q = &q_[static_cast<size_t>(i0) * qd()];
      a.q_stride = qd();
      a.n_q = n;
      a.kv_begin = layout == Layout::kMasked ? nullptr : begin.data();
      a.kv_end = end.data();
      a.q_pos = q_pos.data();
      const bool ring = layout == Layout::kRing;
      a.k = ring ? ring_k_.data() : k_.data();
      a.k_stride = kd();
      a.v = ring ? ring_v_.data() : v_.data();
      a.v_stride = vd();
      a.kv_pos = ring ? ring_pos_.data() : pos_.data();
      a.n_kv = kRows;
      a.kv_wrap = ring ? kRows : 0;
      a.out = &out[static_cast<size_t>(i0) * od()];
      a.out_stride = od();
      Attention(params_, a, pool);
    }
    return out;
  }

 private:
  Case c_;
  AttentionParams params_;
  float sinks_[kHeads] = {0.5f, -1.0f, 2.0f, 6.0f};
  std::vector<float> q_, k_, v_, ring_k_, ring_v_;
  std::vector<int32_t> pos_, ring_pos_;
};

std::string Name(Layout layout) {
  constexpr const char* kNames[] = {"masked", "kv_begin", "ring"};  // in Layout's order
  return kNames[static_cast<int>(layout)];
}

TEST(AttentionTest, AQueryGetsTheSameBitsWhateverItsCall) {
  // Head sizes with and without a tail past a multiple of 8, and past a
  // multiple of 32 (the weighted sums' widest tile).
  const Case cases[] = {
      {64, 64, 0, 0.0f, false},  {64, 64, 13, 0.0f, false}, {20, 44, 0, 25.0f, true},
      {20, 44, 13, 25.0f, true}, {128, 72, 0, 0.0f, true},  {8, 8, 5, 0.0f, false},
  };
  ThreadPool one(1), two(2), three(3);
  for (const Case& c : cases) {
    const CausalRun run(c);
    const std::vector<float> alone = run.Outputs(Layout::kMasked, 1, one);
    for (Layout layout : {Layout::kMasked, Layout::kSkipped, Layout::kRing}) {
      for (int per_call : {1, 5, 8, 37, CausalRun::kQueries}) {
        for (ThreadPool* pool : {&one, &two, &three}) {
          SCOPED_TRACE("head dims " + std::to_string(c.head_dim_k) + "/" + std::to_string(c.head_dim_v) + " window " +
                       std::to_string(c.window) + " softcap " + std::to_string(c.softcap) +
                       (c.sinks ? " sinks " : " ") + Name(layout) + ", " + std::to_string(per_call) + " per call, " +
                       std::to_string(pool->size()) + " threads");
          const std::vector<float> got = run.Outputs(layout, per_call, *pool);
          ASSERT_EQ(got.size(), alone.size());
          int first_diff = -1;
          for (size_t e = 0; e < got.size() && first_diff < 0; ++e) {
            if (std::memcmp(&got[e], &alone[e], sizeof(float)) != 0) first_diff = static_cast<int>(e);
          }
          EXPECT_EQ(first_diff, -1) << "query " << first_diff / run.od() << ": " << got[first_diff] << " vs "
                                    << alone[first_diff] << " alone";
        }
      }
    }
  }
}

}  // namespace
}  // namespace cairn
