// gemma2: the gemma wiring without q/k norms; window 4096 and pattern 2 by
// default, attention logits soft-capped (default 50), final logits too
// (default 30), local RoPE base that of the global layers.
#include "backends/swa/gemma.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadGemma2(const ModelLoader& loader) {
  GemmaVariant v;
  v.default_window = 4096;
  v.default_period = 2;
  v.default_swa_base = -1.0;
  v.local_rope_unscaled = false;
  v.qk_norm = Presence::kOptional;
  v.default_attn_softcap = 50.0;
  v.default_final_softcap = 30.0;
  v.layers_of_27b = 46;
  return LoadGemmaStyle(loader, v);
}

}  // namespace cairn
