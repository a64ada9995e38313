// What a recurrent mixer (Mamba-1/2, Gated DeltaNet, short convolution)
// gets per sequence: its rows of the batch, its state, and state taps.
//
// Taps are copies of a layer's state taken inside a run, after some of its
// rows, so that a checkpoint in the middle of a prompt costs a copy instead
// of a separate Forward call (which would re-read every weight). The scans
// and the causal convolution are sequential per token, so running a run's
// rows in segments that end at the taps gives bit-identical states and
// outputs.
#ifndef CAIRN_BACKENDS_LAYERS_RECURRENT_RUN_H_
#define CAIRN_BACKENDS_LAYERS_RECURRENT_RUN_H_

#include <cstdint>
#include <span>

#include "backends/kernels/conv1d.h"
#include "backends/kernels/thread_pool.h"

namespace cairn {

// After the run's first `rows` rows (1 .. n_rows), the mixer copies the
// layer's conv state and recurrent state, in the memory's own layout, to
// these buffers.
struct StateTap {
  int64_t rows = 0;
  float* conv_state = nullptr;
  float* state = nullptr;
};

// One sequence's part of a mixer call: rows [row_begin, row_begin + n_rows)
// of the batch, its state for this layer (updated in place: conv inputs and
// recurrent state in the layer's layout), and copies of that state to take
// after some of its rows (ascending rows in (0, n_rows], buffers of the
// same sizes).
struct RecurrentRun {
  int64_t row_begin = 0;
  int64_t n_rows = 0;
  float* conv_state = nullptr;
  float* state = nullptr;
  std::span<const StateTap> taps;
};

// Calls segment(begin, n) over [0, n_rows) split at the taps' rows (ascending,
// within (0, n_rows]), and tap(k) after the segment that ends at taps[k].
template <typename Segment, typename Tap>
void ForEachTapSegment(int64_t n_rows, std::span<const StateTap> taps, Segment&& segment, Tap&& tap) {
  int64_t begin = 0;
  for (size_t k = 0; k < taps.size(); ++k) {
    if (taps[k].rows > begin) segment(begin, taps[k].rows - begin);
    begin = taps[k].rows;
    tap(k);
  }
  if (n_rows > begin) segment(begin, n_rows - begin);
}

// The causal depthwise convolution of every run, the first step of every
// recurrent mixer: channels [0, channels) of row r read from x + r * x_stride,
// written to y + r * channels, each run carrying its conv state (and copying
// it into its taps after their rows). `weight` is tap-major
// [d_conv][channels] (TransposeConvWeight), `bias` may be null. Runs and
// blocks of channels spread over `pool`, unless the whole job is below
// `min_parallel_work` multiply-adds (a decode step: cheaper than waking the
// workers).
struct ConvOverRuns {
  const float* x = nullptr;
  int64_t x_stride = 0;
  float* y = nullptr;
  int64_t channels = 0;
  int d_conv = 0;
  const float* weight = nullptr;
  const float* bias = nullptr;
  Conv1dActivation activation = Conv1dActivation::kSilu;
  int64_t min_parallel_work = 0;
};
void CausalConvOverRuns(const ConvOverRuns& conv, std::span<const RecurrentRun> runs, ThreadPool& pool);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_RECURRENT_RUN_H_
