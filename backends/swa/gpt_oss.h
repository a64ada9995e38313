// gpt-oss (llama.cpp's openai-moe): the loader the sliding-window family
// registers for general.architecture "gpt-oss" (swa_family.cc).
//
// Per layer: x += attn(RMSNorm(x, attn_norm)), then
// x += MoE(RMSNorm(x, post_attention_norm)). Attention: sliding window
// (attention.sliding_window) on the layers sliding_window_pattern marks
// (default period 2: even layers local), full elsewhere; head dim
// rope.dimension_count (= key_length), q.k scaled by 1/sqrt(head dim), q/k/v
// biases, an output bias, one sink logit per head (attn_sinks); NEOX RoPE,
// YaRN-scaled as the file says, the local layers' base rope.freq_base_swa
// when present. MoE: router logits ffn_gate_inp . x + bias, top
// expert_used_count of the raw logits, weights the softmax over the chosen;
// experts with biases on gate, up and down and the SwiGLU-OAI activation; no
// shared expert. Untied output.
//
// Errors as ArchLoader's: INVALID_ARGUMENT naming the key or tensor.
#ifndef CAIRN_BACKENDS_SWA_GPT_OSS_H_
#define CAIRN_BACKENDS_SWA_GPT_OSS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "backends/layers/arch_model.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadGptOss(const ModelLoader& loader);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_SWA_GPT_OSS_H_
