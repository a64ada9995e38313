// The sliding-window family (swa_backend.h): its architectures and the
// memory of their sequences.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "backends/layers/family.h"
#include "backends/memory/fingerprint.h"
#include "backends/memory/swa_memory.h"
#include "backends/swa/gemma.h"
#include "backends/swa/gpt_oss.h"
#include "backends/swa/swa_backend.h"

namespace cairn {
namespace {

constexpr ArchEntry kArchs[] = {
    {"gemma3", &LoadGemma3},
    {"gemma2", &LoadGemma2},
    {"gpt-oss", &LoadGptOss},
};

// A ring of W - 1 + slack rows per local layer, a full K/V cache per global one.
absl::StatusOr<FamilyMemory> RingPlan(const ModelFile& model, const ArchShape& s, const BackendOptions& options,
                                      const SwaOptions& swa) {
  if (swa.rollback_slack <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("rollback slack must be positive, got ", swa.rollback_slack));
  }
  SwaGeometry g;
  g.global.assign(s.kv_widths.begin(), s.kv_widths.begin() + s.n_full_slots);
  g.local.assign(s.kv_widths.begin() + s.n_full_slots, s.kv_widths.end());
  g.capacity = options.max_context > 0 ? options.max_context : s.n_ctx_train;
  g.window = std::max<int32_t>(s.window, 1);
  // W - 1 rows serve the next query; the slack is what Truncate can give back.
  const int64_t ring = static_cast<int64_t>(g.window) - 1 + swa.rollback_slack;
  g.ring_rows = static_cast<Pos>(std::min<int64_t>(ring, std::max<Pos>(g.capacity, 1)));
  g.layout =
      MemoryLayout(model, "cairn-swa-f32-v3",
                   {g.n_global(), g.n_local(), KvRowFloats(g.global), KvRowFloats(g.local), g.window, g.ring_rows});
  return ConstructedMemory<SwaMemory>(g, g.capacity);
}

}  // namespace

BackendFamily SwaFamily(const SwaOptions& swa) {
  return LayeredFamily("swa", kArchs, [swa](const ModelFile& model, const ArchShape& s, const BackendOptions& options) {
    return RingPlan(model, s, options, swa);
  });
}

}  // namespace cairn
