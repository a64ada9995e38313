// Run-time choice among the per-ISA kernels (quant_dot_internal.h), by
// cpu_isa.h.
#include "backends/kernels/quant_dot.h"

#include <array>

#include "backends/kernels/cpu_isa.h"
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
