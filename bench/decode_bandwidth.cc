// bench/decode_bandwidth: how close a decode step comes to the memory bus,
// per weight type. One "token" is MatMul with one activation row through
// every weight matrix of a stack of bench-llama layers (n_embd 2048, ffn
// 5632, 8 KV heads of 128: q, k, v, o, gate, up, down), repeated until the
// stack holds --mib MiB (far beyond the caches, as a model's weights are);
// its figure is the weight bytes it reads per second. Beside it, in the same
// round, the read loop of bench_util.h (ReadBandwidth) over a buffer of as
// many bytes on the same pool: the machine's read bandwidth. Rounds
// alternate the two so both see the same load; the table prints medians and
// their ratio, per thread count.
//
// MatMul runs at the server's default precision (8-bit activations where the
// weight type has an integer kernel) unless --activations exact.
//
// The weights are measured as MatMul sees them after a model's load: in
// their kernel's packed layout (PackWeights, matmul.h) where the type has
// one on this CPU and the activations are 8-bit, else as GGUF rows.
// --layout rows measures GGUF rows; --layout packed,rows both, alternating
// round by round (with the read loop between), each on its own line.
//
// --clock cpu times both by the process's CPU time divided by the thread
// count instead of the wall clock: on a machine shared with other work, the
// time slices other processes take then count for neither (a pool thread
// waiting for the other spins, so it counts for both alike).
//
//   decode_bandwidth [--threads 1,2] [--rounds 7] [--mib 384]
//                    [--types f32,f16,bf16,q8_0,q4_0,q4_k,q5_k,q6_k]
//                    [--activations default|exact] [--clock wall|cpu]
//                    [--layout packed|rows|packed,rows]
#include <time.h>
#include <algorithm>
#include <optional>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "backends/kernels/cpu_isa.h"
#include "backends/kernels/matmul.h"
#include "backends/kernels/thread_pool.h"
#include "backends/model/ggml_type.h"
#include "bench/bench_util.h"

namespace cairn {
namespace {

using bench::Rng;

struct Shape {
  int64_t n_in, n_out;
};
// One bench-llama layer's products, in the order a forward pass runs them.
constexpr Shape kLayer[] = {{2048, 2048}, {2048, 1024}, {2048, 1024}, {2048, 2048},
                            {2048, 5632}, {2048, 5632}, {5632, 2048}};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Layers of kLayer in `type` until the stack holds `bytes`; the matrices
// point into `storage`.
std::vector<WeightMatrix> BuildStack(GgmlType type, size_t bytes, std::vector<std::vector<uint8_t>>& storage,
                                     Rng& rng) {
  std::vector<WeightMatrix> stack;
  size_t held = 0;
  while (held < bytes) {
    for (const Shape& s : kLayer) {
      storage.push_back(bench::RandomWeights(type, s.n_in, s.n_out, rng));
      stack.push_back(WeightMatrix{type, s.n_in, s.n_out, storage.back().data()});
      held += stack.back().bytes();
    }
  }
  return stack;
}

// How the weights are laid out (the table's "layout" column).
enum class Layout { kPacked, kRows };

struct Flags {
  std::vector<int> threads = {1, 2};
  int rounds = 7;
  int64_t mib = 384;
  std::vector<GgmlType> types = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,
                                 GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
  MatMulPrecision precision = MatMulPrecision::kInt8Activations;
  bool cpu_clock = false;
  std::vector<Layout> layouts = {Layout::kPacked};
};

// `stack` as MatMul reads it in `layout`: with kPacked and 8-bit
// activations, each matrix that has a packed layout on this CPU packed into
// a copy in `storage`, the others as they are. *name: "packed" when some
// matrix was, else "rows".
std::vector<WeightMatrix> LaidOut(const std::vector<WeightMatrix>& stack, Layout layout, MatMulPrecision precision,
                                  std::vector<std::vector<uint8_t>>& storage, ThreadPool& pool, std::string* name) {
  *name = "rows";
  if (layout == Layout::kRows || precision != MatMulPrecision::kInt8Activations) return stack;
  std::vector<WeightMatrix> laid_out;
  for (const WeightMatrix& w : stack) {
    if (PackingKernel(w.type, w.n_in, w.n_out) == nullptr) {
      laid_out.push_back(w);
      continue;
    }
    storage.emplace_back(w.bytes());
    laid_out.push_back(PackWeights(w, storage.back().data(), pool));
    *name = "packed";
  }
  return laid_out;
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Seconds fn takes: wall clock, or the process's CPU seconds per thread.
template <typename F>
double Time(bool cpu_clock, int threads, F&& fn) {
  if (!cpu_clock) return bench::Best(1, fn);
  const double c0 = ProcessCpuSeconds();
  fn();
  return (ProcessCpuSeconds() - c0) / threads;
}

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "decode_bandwidth: %s\nusage: decode_bandwidth [--threads 1,2] [--rounds 7] [--mib 384] "
               "[--types f32,f16,...] [--activations default|exact] [--clock wall|cpu] [--layout packed,rows]\n",
               why.c_str());
  std::exit(2);
}

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& k = args[i];
    const std::string v = bench::FlagValue(args, &i);
    if (k == "--threads") {
      f.threads.clear();
      for (absl::string_view t : absl::StrSplit(v, ',')) {
        int n = 0;
        if (!absl::SimpleAtoi(t, &n) || n < 1) Usage("bad --threads " + v);
        f.threads.push_back(n);
      }
    } else if (k == "--rounds") {
      if (!absl::SimpleAtoi(v, &f.rounds) || f.rounds < 1) Usage("bad --rounds " + v);
    } else if (k == "--mib") {
      if (!absl::SimpleAtoi(v, &f.mib) || f.mib < 1) Usage("bad --mib " + v);
    } else if (k == "--types") {
      f.types.clear();
      for (absl::string_view t : absl::StrSplit(v, ',')) {
        const std::optional<GgmlType> type = bench::ParseType(std::string_view(t.data(), t.size()));
        if (!type.has_value()) Usage("unknown type " + std::string(t));
        f.types.push_back(*type);
      }
    } else if (k == "--activations") {
      if (v != "default" && v != "exact") Usage("--activations is default or exact");
      f.precision = v == "exact" ? MatMulPrecision::kExact : MatMulPrecision::kInt8Activations;
    } else if (k == "--clock") {
      if (v != "wall" && v != "cpu") Usage("--clock is wall or cpu");
      f.cpu_clock = v == "cpu";
    } else if (k == "--layout") {
      f.layouts.clear();
      for (absl::string_view l : absl::StrSplit(v, ',')) {
        if (l != "packed" && l != "rows") Usage("--layout is packed, rows or both: " + v);
        f.layouts.push_back(l == "packed" ? Layout::kPacked : Layout::kRows);
      }
    } else {
      Usage("unknown flag " + k);
    }
  }
  return f;
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) {
  using namespace cairn;
  const Flags flags = ParseFlags(argc, argv);
  const size_t bytes = static_cast<size_t>(flags.mib) << 20;
  std::printf(
      "decode: one token through %lld MiB of bench-llama layers per type (%s activations), kernels %s;\n"
      "read: bench_util's read loop over as many bytes; medians of %d alternating rounds, %s\n",
      static_cast<long long>(flags.mib), flags.precision == MatMulPrecision::kExact ? "exact" : "default",
      IsaName(BestIsa()).data(), flags.rounds, flags.cpu_clock ? "CPU time per thread" : "wall clock");
  std::printf(
      "| type | layout | threads | weights MiB | decode GB/s | read GB/s | decode / read |\n"
      "|---|---|---|---|---|---|---|\n");
  const std::vector<float> read_buf(bytes / sizeof(float), 1.0f);
  Rng rng;
  int max_threads = 1;
  for (int threads : flags.threads) max_threads = std::max(max_threads, threads);
  ThreadPool packing_pool(max_threads);
  for (GgmlType type : flags.types) {
    std::vector<std::vector<uint8_t>> storage;
    const std::vector<WeightMatrix> stack = BuildStack(type, bytes, storage, rng);
    size_t stack_bytes = 0;
    int64_t max_in = 0, max_out = 0;
    for (const WeightMatrix& w : stack) {
      stack_bytes += w.bytes();
      max_in = std::max(max_in, w.n_in);
      max_out = std::max(max_out, w.n_out);
    }
    std::vector<std::string> names(flags.layouts.size());
    std::vector<std::vector<WeightMatrix>> stacks;
    for (size_t l = 0; l < flags.layouts.size(); ++l) {
      stacks.push_back(LaidOut(stack, flags.layouts[l], flags.precision, storage, packing_pool, &names[l]));
    }
    const std::vector<float> x = rng.SymmetricVec(max_in, 1.0f);
    std::vector<float> y(static_cast<size_t>(max_out));
    for (int threads : flags.threads) {
      ThreadPool pool(threads);
      std::vector<std::vector<double>> decode(stacks.size()), ratio(stacks.size());
      std::vector<double> read;
      for (int r = 0; r <= flags.rounds; ++r) {
        std::vector<double> seconds;
        for (const std::vector<WeightMatrix>& laid_out : stacks) {
          seconds.push_back(Time(flags.cpu_clock, threads, [&] {
            for (const WeightMatrix& w : laid_out) MatMul(w, x.data(), 1, y.data(), pool, flags.precision);
          }));
        }
        double read_bps = 0;
        const double read_s =
            Time(flags.cpu_clock, threads, [&] { read_bps = bench::ReadBandwidth(pool, read_buf, 1); });
        if (flags.cpu_clock) read_bps = static_cast<double>(read_buf.size() * sizeof(float)) / read_s;
        if (r == 0) continue;  // warm-up: first touches, thread start
        read.push_back(read_bps);
        for (size_t l = 0; l < stacks.size(); ++l) {
          decode[l].push_back(static_cast<double>(stack_bytes) / seconds[l]);
          ratio[l].push_back(decode[l].back() / read_bps);
        }
      }
      for (size_t l = 0; l < stacks.size(); ++l) {
        std::printf("| %s | %s | %d | %.0f | %.1f | %.1f | %.2f |\n", TypeName(type).data(), names[l].c_str(), threads,
                    static_cast<double>(stack_bytes) / (1 << 20), Median(decode[l]) / 1e9, Median(read) / 1e9,
                    Median(ratio[l]));
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
