// Run-time choice among the per-ISA kernels (quant_dot_internal.h).
#include "backends/kernels/quant_dot.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "backends/kernels/quant_dot_internal.h"
#include "backends/kernels/quant_dot_kquant.h"

namespace cairn {
namespace {

// Every kernel family; each contributes its kernels for every ISA.
constexpr KernelFamily kFamilies[] = {
    &BlockQuantKernels,
    &KQuantKernels,
};

constexpr Isa kAllIsas[] = {Isa::kAvx512Vnni, Isa::kAvx2, Isa::kPortable};

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Vnni: return "avx512vnni";
    case Isa::kAvx2: return "avx2";
    case Isa::kPortable: return "portable";
  }
  return "portable";
}

bool CpuRuns(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  switch (isa) {
    case Isa::kAvx512Vnni:
      // libgcc also checks that the OS saves the AVX-512 state (XCR0).
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
             __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::kPortable: return true;
  }
  return false;
#else
  return isa == Isa::kPortable;
#endif
}

// The fastest ISA allowed: what the CPU runs, capped by CAIRN_ISA. An
// unknown CAIRN_ISA value is ignored (one warning on stderr): a typo must
// not silently make a server 3x slower, nor stop it.
Isa BestIsa() {
  Isa cap = Isa::kAvx512Vnni;
  if (const char* env = std::getenv("CAIRN_ISA"); env != nullptr && *env != '\0') {
    bool known = false;
    for (Isa isa : kAllIsas) {
      if (IsaName(isa) == env) {
        cap = isa;
        known = true;
      }
    }
    if (!known) {
      std::fprintf(stderr, "cairn: CAIRN_ISA=%s is not one of avx512vnni, avx2, portable; ignored\n", env);
    }
  }
  for (Isa isa : kAllIsas) {
    if (static_cast<int>(isa) >= static_cast<int>(cap) && CpuRuns(isa)) return isa;
  }
  return Isa::kPortable;
}

// Indexed by the GGUF type id; the ids cairn knows are small.
constexpr size_t kMaxTypeId = 64;

struct Registry {
  // Every runnable kernel per type, fastest first.
  std::array<std::vector<const QuantDotKernel*>, kMaxTypeId> runnable;
  // The one FindQuantDot returns (first runnable at or below the cap).
  std::array<const QuantDotKernel*, kMaxTypeId> best{};
};

const Registry& GetRegistry() {
  static const Registry* registry = [] {
    auto* r = new Registry;
    const Isa best = BestIsa();
    for (Isa isa : kAllIsas) {
      if (!CpuRuns(isa)) continue;
      for (KernelFamily family : kFamilies) {
        for (const QuantDotKernel* k : family(isa)) {
          const auto id = static_cast<size_t>(k->weight_type);
          if (id >= kMaxTypeId) continue;
          r->runnable[id].push_back(k);
          if (r->best[id] == nullptr && static_cast<int>(isa) >= static_cast<int>(best)) r->best[id] = k;
        }
      }
    }
    return r;
  }();
  return *registry;
}

}  // namespace

const QuantDotKernel* FindQuantDot(GgmlType type) {
  const auto id = static_cast<size_t>(type);
  return id < kMaxTypeId ? GetRegistry().best[id] : nullptr;
}

std::vector<const QuantDotKernel*> QuantDotKernelsFor(GgmlType type) {
  const auto id = static_cast<size_t>(type);
  return id < kMaxTypeId ? GetRegistry().runnable[id] : std::vector<const QuantDotKernel*>{};
}

}  // namespace cairn
