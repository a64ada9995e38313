#ifndef CAIRN_BACKENDS_LAYERS_WORK_BUFFERS_H_
#define CAIRN_BACKENDS_LAYERS_WORK_BUFFERS_H_

#include <cstddef>
#include <vector>

namespace cairn {

// Work buffers of a backend's passes, kept across calls so that a 512-row
// prompt does not allocate and zero-fill tens of MiB per layer. Grows to the
// largest call seen. Each block uses its own slots, so a block's input (in
// kNormed, say) survives the block.
class WorkBuffers {
 public:
  enum Slot {
    kNormed,     // a norm of the stream: a block's input
    kBlockOut,   // a block's output, before the residual add
    kQueryFull,  // attention: the query projection (with gates, when gated)
    kQuery,      // attention: queries alone
    kKey,
    kValue,
    kAttention,  // attention output per head, before the output projection
    kFfnGate,
    kFfnUp,
    kSharedExpert,  // MoE: the shared expert's output
    kParallelOut,   // a second block's output, when two run side by side (falcon-h1)
    kLogits,        // the output head's logits of the wanted rows
    kMixer0,        // recurrent mixers: kMixer0 .. kMixer0 + kMixerSlots - 1
    kSlotCount = kMixer0 + 6,
  };
  static constexpr int kMixerSlots = kSlotCount - kMixer0;

  // At least n floats for `slot`; contents undefined.
  float* Get(int slot, size_t n) {
    if (bufs_[slot].size() < n) bufs_[slot].resize(n);
    return bufs_[slot].data();
  }

 private:
  std::vector<float> bufs_[kSlotCount];
};

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_WORK_BUFFERS_H_
