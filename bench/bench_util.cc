#include "bench/bench_util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__FMA__)
#include <immintrin.h>
#endif

#include "backends/model/dequant.h"

namespace cairn::bench {

double ReadBandwidth(ThreadPool& pool, const std::vector<float>& buf, int reps) {
  const size_t n = buf.size();
  std::vector<double> sums(static_cast<size_t>(pool.size()) * 16, 0.0);
  const double s = Best(reps, [&] {
    pool.ParallelFor(static_cast<int64_t>(n), 1 << 20, [&](int64_t b, int64_t e) {
      float acc[16] = {};
      for (int64_t i = b; i + 16 <= e; i += 16) {
        for (int k = 0; k < 16; ++k) acc[k] += buf[i + k];
      }
      float t = 0;
      for (float v : acc) t += v;
      sums[(b * pool.size() / static_cast<int64_t>(n)) * 16] += t;  // keep the loop alive
    });
  });
  return static_cast<double>(n * sizeof(float)) / s;
}

double FmaPeakFlops(ThreadPool& pool, int reps) {
  // 12 independent accumulators cover the FMA latency x throughput of
  // current x86 cores (4-5 cycles x 2 pipes). The project builds in ISO
  // C++ (no contraction), so the fused form is spelled out.
#if defined(__FMA__)
  using V8 = __m256;
#else
  typedef float V8 __attribute__((vector_size(32)));
#endif
  constexpr int kAcc = 12;
  constexpr int64_t kIters = 1 << 22;
  const int threads = pool.size();
  std::vector<float> sink(static_cast<size_t>(threads) * 16, 0.0f);
  const double s = Best(reps, [&] {
    pool.ParallelFor(threads, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        V8 acc[kAcc], m = {}, c = {};
        for (int k = 0; k < kAcc; ++k) acc[k] = V8{} + static_cast<float>(k + t);
        m += 0.999999f;
        c += 1e-7f;
        // The asm keeps m and c opaque so the loop is not folded.
        asm volatile("" : "+x"(m), "+x"(c));
        for (int64_t i = 0; i < kIters; ++i) {
#pragma GCC unroll 12
          for (int k = 0; k < kAcc; ++k) {
#if defined(__FMA__)
            acc[k] = _mm256_fmadd_ps(acc[k], m, c);
#else
            acc[k] = acc[k] * m + c;
#endif
          }
        }
        float total = 0;
        for (int k = 0; k < kAcc; ++k) {
          for (int l = 0; l < 8; ++l) total += acc[k][l];
        }
        sink[static_cast<size_t>(t) * 16] = total;
      }
    });
  });
  return 2.0 * 8 * kAcc * static_cast<double>(kIters) * threads / s;
}

double ReadBandwidth1GiB(ThreadPool& pool, int reps) {
  const std::vector<float> buf(size_t{1} << 28, 1.0f);
  return ReadBandwidth(pool, buf, reps);
}

std::vector<uint8_t> RandomWeights(GgmlType type, int64_t n_in, int64_t n_out, Rng& rng) {
  const size_t n = static_cast<size_t>(n_in * n_out);
  const float a = 1.0f / std::sqrt(static_cast<float>(n_in));
  if (type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16) {
    std::vector<uint8_t> data(RowBytes(type, n_in) * static_cast<size_t>(n_out));
    for (size_t i = 0; i < n; ++i) {
      const float v = rng.Symmetric(a);
      if (type == GgmlType::kF32) {
        std::memcpy(&data[i * 4], &v, 4);
      } else {
        const uint16_t h = type == GgmlType::kF16 ? Fp32ToFp16(v) : Fp32ToBf16(v);
        std::memcpy(&data[i * 2], &h, 2);
      }
    }
    return data;
  }
  return synthetic::RandomBlocks(type, n_in * n_out, a, rng);
}

std::optional<GgmlType> ParseType(std::string_view name) {
  for (uint32_t id = 0; id < 64; ++id) {
    const std::optional<GgmlTypeTraits> t = TraitsOf(id);
    if (t.has_value() && t->name.size() == name.size() &&
        std::equal(name.begin(), name.end(), t->name.begin(),
                   [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
      return static_cast<GgmlType>(id);
    }
  }
  return std::nullopt;
}

MemcpySeconds MeasureMemcpy(size_t bytes, int reps) {
  std::vector<uint8_t> src(bytes, 1), dst(bytes, 0);
  MemcpySeconds m;
  m.reused = Best(reps, [&] { std::memcpy(dst.data(), src.data(), bytes); });
  m.fresh = Best(reps, [&] {
    std::vector<uint8_t> fresh(src.begin(), src.end());
    if (fresh[bytes / 2] != 1) std::abort();
  });
  return m;
}

std::string FlagValue(const std::vector<std::string>& args, size_t* i) {
  if (*i + 1 >= args.size()) {
    std::fprintf(stderr, "%s needs a value\n", args[*i].c_str());
    std::exit(2);
  }
  return args[++*i];
}

void IntFlags(int argc, char** argv, std::initializer_list<std::pair<const char*, int*>> flags) {
  for (int i = 1; i + 1 < argc; i += 2) {
    for (const auto& [name, target] : flags) {
      if (std::strcmp(argv[i], name) == 0) *target = std::atoi(argv[i + 1]);
    }
  }
}

double DecodeGreedy(Backend& backend, SequenceMemory* memory, int n) {
  TokenId next = 5;
  const int32_t row0[] = {0};
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    const TokenId tok[] = {next};
    SequenceRun run{memory, memory->next_pos(), tok, nullptr, row0, {}};
    auto out = backend.Forward(std::span<const SequenceRun>(&run, 1));
    if (!out.ok()) std::abort();
    next = static_cast<TokenId>(std::max_element((*out)[0].values.begin(), (*out)[0].values.end()) -
                                (*out)[0].values.begin());
  }
  return Seconds(t0, Clock::now()) / n;
}

std::shared_ptr<const ModelFile> ModelOrDie(const synthetic::SyntheticModel& model, const std::string& name) {
  absl::StatusOr<std::shared_ptr<const ModelFile>> m = model.Open(name);
  if (!m.ok()) {
    std::fprintf(stderr, "synthetic %s: %s\n", name.c_str(), std::string(m.status().message()).c_str());
    std::exit(1);
  }
  return *std::move(m);
}

void Die(const std::string& what, const absl::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), s.ToString().c_str());
  std::exit(1);
}

}  // namespace cairn::bench
