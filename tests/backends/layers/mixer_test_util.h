// For the recurrent mixers' tests: sequences with their own recurrent
// memory run through a mixer over several passes (prompt-like and decode
// rows, several sequences per pass), each output row checked against a
// sequential double-precision reference of that sequence.
#ifndef CAIRN_TESTS_BACKENDS_LAYERS_MIXER_TEST_UTIL_H_
#define CAIRN_TESTS_BACKENDS_LAYERS_MIXER_TEST_UTIL_H_

#include <memory>
#include <vector>

#include "backends/memory/recurrent_memory.h"
#include "tests/backends/layers/block_test_util.h"

namespace cairn::testing {

// `Mixer` is a mixer under test: n_embd(), conv_floats() and state_floats()
// (per sequence), Forward(pass, xn, out) running the block on recurrent slot
// 0, and Mixer::Sequence(mixer), a sequence's sequential reference whose
// Row(x) is the output of its next row.
template <typename Mixer>
void ExpectMixerMatches(const Mixer& mixer, const std::vector<std::vector<int64_t>>& passes, const char* what) {
  const size_t n_seq = passes.front().size();
  std::vector<std::unique_ptr<RecurrentMemory>> memories;
  std::vector<LayerMemory*> mems;
  std::vector<typename Mixer::Sequence> refs;
  for (size_t s = 0; s < n_seq; ++s) {
    memories.push_back(*RecurrentMemory::Create(nullptr, 0, 1, mixer.conv_floats(), mixer.state_floats()));
    mems.push_back(memories.back().get());
    refs.emplace_back(mixer);
  }
  const int64_t n_embd = mixer.n_embd();
  uint64_t seed = 50;
  for (const std::vector<int64_t>& rows : passes) {
    Pass pass(mems, rows, n_embd);
    const std::vector<float> xn = RandomRows(pass.n_rows(), n_embd, seed++);
    std::vector<float> out(static_cast<size_t>(pass.n_rows() * n_embd));
    mixer.Forward(*pass, xn.data(), out.data());
    for (size_t s = 0; s < n_seq; ++s) {
      std::vector<Vec> want;
      for (int64_t i = 0; i < rows[s]; ++i) want.push_back(refs[s].Row(Row(xn, pass.first_row(s) + i, n_embd)));
      ExpectRowsNear(&out[pass.first_row(s) * n_embd], want, 1e-5, what);
    }
    pass.Commit();
  }
}

// A causal depthwise convolution's carried window (oldest first) for a
// sequential reference: Push(u) returns sum_k window[k][c] * weight[k][c]
// over the last `taps` inputs, u the newest.
class ConvWindow {
 public:
  ConvWindow(int64_t taps, int64_t channels) : taps_(taps), window_(static_cast<size_t>(taps), Vec(channels, 0.0)) {}
  // `weight` tap-major [taps][channels].
  Vec Push(const Vec& u, const std::vector<float>& weight) {
    window_.erase(window_.begin());
    window_.push_back(u);
    Vec y(u.size(), 0.0);
    for (int64_t k = 0; k < taps_; ++k) {
      for (size_t c = 0; c < u.size(); ++c) y[c] += window_[k][c] * weight[k * u.size() + c];
    }
    return y;
  }

 private:
  int64_t taps_;
  std::vector<Vec> window_;
};

// What a sequential reference of a recurrent mixer holds: the mixer's
// geometry and weights, its conv window and its recurrent state (zeros).
template <typename Geometry, typename Weights>
struct SequenceState {
  SequenceState(const Geometry& geometry, const Weights& weights, int64_t conv_channels, int64_t state_floats)
      : g(geometry), w(weights), conv(geometry.d_conv, conv_channels), state(static_cast<size_t>(state_floats)) {}
  const Geometry& g;
  const Weights& w;
  ConvWindow conv;
  Vec state;
};

}  // namespace cairn::testing

#endif  // CAIRN_TESTS_BACKENDS_LAYERS_MIXER_TEST_UTIL_H_
