#include "backends/layers/recurrent_run.h"

#include <algorithm>
#include <cstring>

namespace cairn {

void CausalConvOverRuns(const ConvOverRuns& c, std::span<const RecurrentRun> runs, ThreadPool& pool) {
  constexpr int64_t kBlock = 256;
  const int64_t C = c.channels;
  const int64_t n_blocks = (C + kBlock - 1) / kBlock;
  int64_t n_rows = 0;
  for (const RecurrentRun& r : runs) n_rows += r.n_rows;
  const int64_t items = static_cast<int64_t>(runs.size()) * n_blocks;
  const int64_t grain = n_rows * C * c.d_conv < c.min_parallel_work ? std::max<int64_t>(items, 1) : 1;
  pool.ParallelFor(items, grain, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const RecurrentRun& r = runs[item / n_blocks];
      const int64_t c0 = (item % n_blocks) * kBlock;
      Conv1dArgs a;
      a.n_channels = std::min(kBlock, C - c0);
      a.d_conv = c.d_conv;
      a.x_stride = c.x_stride;
      a.y_stride = C;
      a.state = r.conv_state + c0;
      a.state_stride = C;
      a.weight = c.weight + c0;
      a.weight_stride = C;
      a.bias = c.bias != nullptr ? c.bias + c0 : nullptr;
      a.activation = c.activation;
      ForEachTapSegment(
          r.n_rows, r.taps,
          [&](int64_t first, int64_t n) {
            a.n_tokens = n;
            a.x = c.x + (r.row_begin + first) * c.x_stride + c0;
            a.y = c.y + (r.row_begin + first) * C + c0;
            CausalConv1d(a);
          },
          [&](size_t k) {
            for (int64_t row = 0; row < c.d_conv - 1; ++row) {
              std::memcpy(r.taps[k].conv_state + row * C + c0, r.conv_state + row * C + c0,
                          static_cast<size_t>(a.n_channels) * sizeof(float));
            }
          });
    }
  });
}

}  // namespace cairn
