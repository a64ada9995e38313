#include "bench/bench_util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

double ReadBandwidth1GiB(ThreadPool& pool, int reps) {
  const std::vector<float> buf(size_t{1} << 28, 1.0f);
  return ReadBandwidth(pool, buf, reps);
}

std::vector<uint8_t> RandomWeights(GgmlType type, int64_t n_in, int64_t n_out, Rng& rng) {
  const size_t bytes = RowBytes(type, n_in) * static_cast<size_t>(n_out);
  const size_t n = static_cast<size_t>(n_in * n_out);
  std::vector<uint8_t> data(bytes);
  const float a = 1.0f / std::sqrt(static_cast<float>(n_in));
  if (type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16) {
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
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = rng.Next();
    std::memcpy(&data[i], &v, 8);
  }
  const uint16_t d = Fp32ToFp16(a / 64.0f), dmin = Fp32ToFp16(a / 256.0f);
  for (size_t off = 0; off < bytes; off += Traits(type).block_bytes) {
    uint8_t* b = &data[off];
    switch (type) {
      case GgmlType::kQ6_K: std::memcpy(b + 208, &d, 2); break;
      case GgmlType::kQ4_K:
      case GgmlType::kQ5_K:
      case GgmlType::kQ4_1:
      case GgmlType::kQ5_1:
        std::memcpy(b, &d, 2);
        std::memcpy(b + 2, &dmin, 2);
        break;
      default: std::memcpy(b, &d, 2); break;
    }
  }
  return data;
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
