// The transformer family (transformer.h): its architectures and the memory
// of their sequences.
#include "backends/layers/family.h"
#include "backends/memory/fingerprint.h"
#include "backends/memory/kv_memory.h"
#include "backends/transformer/llama.h"
#include "backends/transformer/transformer.h"

namespace cairn {
namespace {

constexpr ArchEntry kArchs[] = {
    {"llama", &LoadLlama},       {"qwen2", &LoadQwen2}, {"qwen3", &LoadQwen3},
    {"qwen3moe", &LoadQwen3Moe}, {"deci", &LoadDeci},
};

// A full K/V cache per layer, up to --max-context or the training context.
absl::StatusOr<FamilyMemory> KvPlan(const ModelFile& model, const ArchShape& s, const BackendOptions& options) {
  KvGeometry g;
  g.layers = s.kv_widths;
  g.capacity = options.max_context > 0 ? options.max_context : s.n_ctx_train;
  // The model's fingerprint covers its per-layer head counts; the totals size the memory.
  g.layout = MemoryLayout(model, "cairn-kv-f32-v3", {g.n_layers(), KvRowFloats(g.layers)});
  return ConstructedMemory<KvMemory>(g, g.capacity);
}

}  // namespace

BackendFamily TransformerFamily() { return LayeredFamily("transformer", kArchs, &KvPlan); }

}  // namespace cairn
