// xorshift64 from a fixed seed: the generator of the deterministic random
// weights of synthetic models (synthetic_model.h). Header-only and
// dependency-free.
#ifndef CAIRN_SYNTHETIC_XORSHIFT_RNG_H_
#define CAIRN_SYNTHETIC_XORSHIFT_RNG_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cairn::synthetic {

// xorshift64 from a fixed seed: fast, and the same values on every machine.
class XorShiftRng {
 public:
  static constexpr uint64_t kDefaultSeed = 0x9e3779b97f4a7c15ull;
  // Seed 0 would stay 0 forever: it is taken as kDefaultSeed.
  explicit XorShiftRng(uint64_t seed = kDefaultSeed) : s_(seed != 0 ? seed : kDefaultSeed) {}

  uint64_t Next() {
    s_ ^= s_ << 13;
    s_ ^= s_ >> 7;
    s_ ^= s_ << 17;
    return s_;
  }
  // lo + (hi - lo) * u, u uniform in [0, 1).
  float Uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(Next() >> 40) / static_cast<float>(1 << 24);
  }
  // (2u - 1) * a: uniform in [-a, a).
  float Symmetric(float a) { return (static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * a; }
  std::vector<float> Vec(int64_t n, float lo, float hi) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = Uniform(lo, hi);
    return v;
  }
  std::vector<float> SymmetricVec(int64_t n, float a) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = Symmetric(a);
    return v;
  }

 private:
  uint64_t s_;
};

}  // namespace cairn::synthetic

#endif  // CAIRN_SYNTHETIC_XORSHIFT_RNG_H_
