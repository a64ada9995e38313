// The sliding-window family: decoder-only models that interleave local
// (sliding-window) and global attention layers; their memory (SwaMemory)
// keeps a ring per local layer and a full K/V cache per global layer, so it
// can be cut back only within the rings' slack. Architectures (wiring in
// gemma3.cc, gemma2.cc and gpt_oss.cc):
//  - gemma3: layer il is local iff il % P < P - 1 (P = sliding_window_pattern,
//    default 6); window W = attention.sliding_window (absent or 0: every layer
//    global); local layers use RoPE base rope.freq_base_swa (default 1e4)
//    unscaled, global layers rope.freq_base with linear scaling; NEOX RoPE,
//    per-head q/k RMS norms, sandwich norms around attention and FFN, GeGLU
//    (tanh GELU), embeddings scaled by sqrt(n_embd), optional final logit
//    soft cap (final_logit_softcapping).
//  - gemma2: the same block without q/k norms; window default 4096, pattern
//    2, attention logit soft cap (attn_logit_softcapping, default 50) and
//    final soft cap (default 30).
//  - gpt-oss: sliding-window and full layers (pattern default 2: even layers
//    local), attention with q/k/v/output biases and a sink logit per head,
//    NEOX RoPE with YaRN scaling, a mixture of experts in every layer (router
//    bias, softmax over the chosen logits, biased SwiGLU-OAI experts); see
//    gpt_oss.h.
// A query at position p of a local layer sees keys at p - W + 1 .. p, as in
// llama.cpp.
#ifndef CAIRN_BACKENDS_SWA_SWA_BACKEND_H_
#define CAIRN_BACKENDS_SWA_SWA_BACKEND_H_

#include <cstdint>

#include "backends/backend.h"

namespace cairn {

struct SwaOptions {
  // Positions each ring keeps beyond the W - 1 the next query needs: how far
  // a sequence can be cut back without a checkpoint right after a Forward.
  // 512 matches the reach of llama.cpp's SWA cache (W + its default ubatch).
  // Runs of any length are accepted whatever the slack.
  int32_t rollback_slack = 512;
};

// Name "swa" (the registry takes the default options). Its factory's
// errors: INVALID_ARGUMENT for a file of another architecture,
// missing/inconsistent tensors or metadata (the message names them), or a
// non-positive slack; UNIMPLEMENTED for RoPE scaling kinds not supported.
BackendFamily SwaFamily(const SwaOptions& options = SwaOptions());

}  // namespace cairn

#endif  // CAIRN_BACKENDS_SWA_SWA_BACKEND_H_
