// Shared by the benchmarks in bench/: timing, the read-bandwidth roofline,
// and opening a synthetic model (synthetic/) or dying.
#ifndef CAIRN_BENCH_BENCH_UTIL_H_
#define CAIRN_BENCH_BENCH_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "backends/backend.h"
#include "backends/kernels/thread_pool.h"
#include "backends/model/gguf.h"
#include "synthetic/synthetic_model.h"

namespace cairn::bench {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
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

// F32 multiply-adds per second (x2: FLOP/s) that `pool`'s threads reach
// on independent vector accumulators with no memory traffic: the ceiling of
// any F32 product on this machine (with the build's instruction set: FMA on
// -march=native x86). Best of `reps` runs.
double FmaPeakFlops(ThreadPool& pool, int reps);

// The synthetic weights' generator (synthetic/).
using Rng = synthetic::Rng;

// n_out rows of n_in random weights of `type`, as GGUF stores them: F32, F16
// and BF16 values uniform in +-1/sqrt(n_in); block types random quant bytes
// with valid fp16 block scales (about 1/(64 sqrt(n_in)), mins a quarter of
// that), so every kernel sees finite values. n_in a multiple of the type's
// block size.
std::vector<uint8_t> RandomWeights(GgmlType type, int64_t n_in, int64_t n_out, Rng& rng);

// The weight type named `name` as GGUF spells it, in any case ("q4_k",
// "BF16"), or nullopt.
std::optional<GgmlType> ParseType(std::string_view name);

// Best-of-`reps` seconds of copying `bytes` bytes with memcpy into a reused
// buffer, and into a freshly allocated vector: the baselines of snapshot
// restore and capture.
struct MemcpySeconds {
  double reused = 0;
  double fresh = 0;
};
MemcpySeconds MeasureMemcpy(size_t bytes, int reps);

// Sets *target to the integer after each "--name" of `names` in argv (the
// other flags are the caller's to read).
void IntFlags(int argc, char** argv, std::initializer_list<std::pair<const char*, int*>> flags);

// Seconds per token of `n` greedy decode steps (from token 5) of `memory`;
// aborts when a Forward fails.
double DecodeGreedy(Backend& backend, SequenceMemory* memory, int n);

// The value after the flag args[*i], advancing *i past it; exits with status
// 2 and a message naming the flag when there is none.
std::string FlagValue(const std::vector<std::string>& args, size_t* i);

// Prints "<what>: <status>" and exits 1: a benchmark whose measured code
// fails has nothing left to measure.
[[noreturn]] void Die(const std::string& what, const absl::Status& s);

// `model` opened as `name`; on failure prints "synthetic <name>: <message>"
// and exits 1.
std::shared_ptr<const ModelFile> ModelOrDie(const synthetic::SyntheticModel& model, const std::string& name);

}  // namespace cairn::bench

#endif  // CAIRN_BENCH_BENCH_UTIL_H_
