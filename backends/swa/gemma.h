// The gemma wiring, shared by the sliding-window architectures that hold
// the same blocks: embeddings scaled by sqrt(n_embd); per layer
// x += RMSNorm(attn(RMSNorm(x))) and x += RMSNorm(GeGLU(RMSNorm(x)))
// (sandwich norms); local layers attend over a sliding window (a ring slot)
// with their own RoPE base, global layers over the full cache. What differs
// per architecture is a GemmaVariant (gemma3.cc, gemma2.cc); LoadGemmaStyle
// reads it into a LayerStack.
#ifndef CAIRN_BACKENDS_SWA_GEMMA_H_
#define CAIRN_BACKENDS_SWA_GEMMA_H_

#include <memory>

#include "absl/status/statusor.h"
#include "backends/layers/arch_model.h"
#include "backends/layers/attention.h"

namespace cairn {

struct GemmaVariant {
  int64_t default_window = 0;         // attention.sliding_window when absent (0: every layer global)
  int64_t default_period = 6;         // sliding_window_pattern when absent: layer il is local iff il % P < P - 1
  double default_swa_base = 10000.0;  // rope.freq_base_swa when absent; < 0: the global base
  bool local_rope_unscaled = true;    // local layers ignore the linear RoPE scaling
  Presence qk_norm = Presence::kRequired;
  double default_attn_softcap = -1.0;  // attn_logit_softcapping when absent; < 0: key not read, no soft cap
  double default_final_softcap = 0.0;
  int64_t layers_of_27b = 62;  // that model scales queries by 1/sqrt(n_embd / n_head)
};

absl::StatusOr<std::unique_ptr<ArchModel>> LoadGemmaStyle(const ModelLoader& loader, const GemmaVariant& variant);

// The loaders registered to the family (swa_family.cc).
absl::StatusOr<std::unique_ptr<ArchModel>> LoadGemma3(const ModelLoader& loader);
absl::StatusOr<std::unique_ptr<ArchModel>> LoadGemma2(const ModelLoader& loader);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_SWA_GEMMA_H_
