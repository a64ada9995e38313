// Shared by the benchmarks in bench/: timing, the read-bandwidth roofline,
// the deterministic xorshift generator of synthetic weights, and turning
// GgufWriter bytes into a ModelFile.
#ifndef CAIRN_BENCH_BENCH_UTIL_H_
#define CAIRN_BENCH_BENCH_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/kernels/thread_pool.h"
#include "backends/model/gguf.h"

namespace cairn::bench {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
inline double Since(Clock::time_point t0) { return Seconds(t0, Clock::now()); }

// Seconds of the best of `reps` runs of fn.
template <typename F>
double Best(int reps, F&& fn) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, Seconds(t0, Clock::now()));
  }
  return best;
}

// Read bandwidth, in bytes/s, a plain summing loop reaches on `pool`'s
// threads over `buf` (best of `reps` passes).
double ReadBandwidth(ThreadPool& pool, const std::vector<float>& buf, int reps);

// The same over a fresh 1 GiB buffer (larger than any cache).
double ReadBandwidth1GiB(ThreadPool& pool, int reps);

// xorshift64 from a fixed seed: fast, and the same values on every machine.
class Rng {
 public:
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
  uint64_t s_ = 0x9e3779b97f4a7c15ull;
};

// ModelFile over serialized GGUF bytes; on failure prints
// "synthetic <name>: <message>" and exits 1.
std::shared_ptr<const ModelFile> ModelOrDie(const std::vector<uint8_t>& bytes, const std::string& name);

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_BENCH_UTIL_H_
