#include "tests/backends/layers/block_test_util.h"

#include <algorithm>
#include <string>

namespace cairn::testing {

Pass::Pass(std::vector<LayerMemory*> memories, std::vector<int64_t> rows, int64_t n_embd, int threads,
           bool last_rows_only)
    : memories_(std::move(memories)), rows_(std::move(rows)), pool_(threads) {
  const size_t R = memories_.size();
  tokens_.resize(R);
  wanted_.resize(R);
  batch_.resize(R);
  results_.resize(R);
  snapshot_states_.resize(R);
  for (size_t s = 0; s < R; ++s) {
    LayerMemory* m = memories_[s];
    const int64_t n = rows_[s];
    EXPECT_TRUE(m->Reserve(m->next_pos() + static_cast<Pos>(n), m->stored_rows() + n).ok());
    tokens_[s].assign(static_cast<size_t>(n), 0);
    for (int64_t i = last_rows_only ? n - 1 : 0; i < n; ++i) wanted_[s].push_back(static_cast<int32_t>(i));
    batch_[s] = SequenceRun{m, m->next_pos(), tokens_[s], nullptr, wanted_[s], {}};
    results_[s].n_rows = static_cast<int32_t>(wanted_[s].size());
    segments_.push_back({s, 0, n});
    first_row_.push_back(n_rows_);
    n_rows_ += n;
  }
  pass_ = std::make_unique<ForwardPass>(batch_, segments_, memories_, results_, snapshot_states_, n_embd, pool_,
                                        MatMulPrecision::kExact, buffers_);
}

void Pass::Commit() {
  for (size_t s = 0; s < memories_.size(); ++s) memories_[s]->Commit(static_cast<Pos>(rows_[s]), rows_[s], false);
}

std::vector<float> RandomRows(int64_t rows, int64_t width, uint64_t seed) {
  synthetic::XorShiftRng rng(seed);
  return rng.Vec(rows * width, -1.0f, 1.0f);
}

void ExpectRowsNear(const float* got, const std::vector<Vec>& want, double tol, const std::string& what) {
  double scale = 1e-30;
  for (const Vec& row : want) {
    for (double v : row) scale = std::max(scale, std::abs(v));
  }
  double worst = 0;
  size_t worst_row = 0;
  for (size_t r = 0; r < want.size(); ++r) {
    const size_t w = want[r].size();
    for (size_t i = 0; i < w; ++i) {
      const double d = std::abs(static_cast<double>(got[r * w + i]) - want[r][i]);
      if (d > worst) {
        worst = d;
        worst_row = r;
      }
    }
  }
  EXPECT_LE(worst / scale, tol) << what << ": row " << worst_row << " off by " << worst << " (scale " << scale << ")";
}

}  // namespace cairn::testing
