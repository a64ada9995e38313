// A stable 64-bit hash (same value in every process and build), used for
// multimodal chunk identity and for checksums of checkpoint files. Not
// cryptographic: it detects corruption and torn writes, not tampering.
#ifndef CAIRN_CHECKPOINT_HASH_H_
#define CAIRN_CHECKPOINT_HASH_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cairn::checkpoint {

// Streaming 64-bit hash: 4 independent multiply-rotate lanes over 8-byte
// words (fast enough for megabytes of snapshot per call), finished with a
// strong avalanche so that any changed bit changes the result.
class Hash64 {
 public:
  explicit Hash64(uint64_t seed = 0) {
    for (int i = 0; i < 4; ++i) lanes_[i] = seed + kPrimes[i];
  }

  void Update(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    total_ += n;
    // Fill the pending 32-byte block first.
    while (n > 0 && fill_ > 0) {
      buf_[fill_++] = *p++;
      --n;
      if (fill_ == 32) {
        Block(buf_);
        fill_ = 0;
      }
    }
    while (n >= 32) {
      Block(p);
      p += 32;
      n -= 32;
    }
    while (n > 0) {
      buf_[fill_++] = *p++;
      --n;
    }
  }

  uint64_t Finish() const {
    uint64_t h = total_ * kPrimes[4];
    for (int i = 0; i < 4; ++i) h = Mix(h ^ Rot(lanes_[i], 17 + i * 7));
    for (size_t i = 0; i < fill_; ++i) h = Mix(h ^ (uint64_t{buf_[i]} + (uint64_t{i} << 8)));
    return Mix(h);
  }

 private:
  static constexpr uint64_t kPrimes[5] = {0x9E3779B185EBCA87ULL, 0xC2B2AE3D27D4EB4FULL, 0x165667B19E3779F9ULL,
                                          0x85EBCA77C2B2AE63ULL, 0x27D4EB2F165667C5ULL};
  static uint64_t Rot(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static uint64_t Mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ULL;
    x ^= x >> 33;
    return x;
  }
  void Block(const uint8_t* p) {
    for (int i = 0; i < 4; ++i) {
      uint64_t w;
      std::memcpy(&w, p + 8 * i, 8);
      lanes_[i] = Rot(lanes_[i] + w * kPrimes[1], 31) * kPrimes[0];
    }
  }

  uint64_t lanes_[4];
  uint8_t buf_[32] = {};
  size_t fill_ = 0;
  uint64_t total_ = 0;
};

inline uint64_t HashBytes(const void* data, size_t n, uint64_t seed = 0) {
  Hash64 h(seed);
  h.Update(data, n);
  return h.Finish();
}

}  // namespace cairn::checkpoint

#endif  // CAIRN_CHECKPOINT_HASH_H_
