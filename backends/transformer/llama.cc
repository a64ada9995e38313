// llama: x += attn(RMSNorm(x)); x += SwiGLU(RMSNorm(x)); GQA with one head
// count for every layer (the variant may take them per layer), NORMAL RoPE (optionally with rope_freqs factors and
// linear scaling), optional biases, tied or untied output. The family's other
// architectures are variants of this wiring (llama.h).
#include "backends/transformer/llama.h"
#include "absl/strings/str_cat.h"
#include "backends/layers/layer_stack.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadLlamaStyle(const ModelLoader& ld, const LlamaVariant& variant) {
  auto m = std::make_unique<LayerStack>();
  DecoderHParams hp;
  CAIRN_LOAD_ASSIGN(hp, ReadDecoderHParams(ld, 2048));
  CAIRN_RETURN_IF_ERROR(CheckHeadCounts(ld, hp, variant.heads));
  m->eps = hp.eps;
  double attn_scale = 0;
  CAIRN_LOAD_ASSIGN(m->rope.params, ReadRope(ld, variant.rope, hp.head_dim_k));
  CAIRN_LOAD_ASSIGN(attn_scale, ld.FloatOr("attention.scale", 0.0));
  // Past the last layer's attention only the wanted rows matter.
  m->wanted_rows_after_last_attention = true;

  const int64_t n_embd = hp.n_embd;
  CAIRN_LOAD_ASSIGN(m->tok_embd, LoadTokenEmbedding(ld, n_embd));
  CAIRN_LOAD_ASSIGN(m->head, LoadOutputHead(ld, *m->tok_embd, hp.eps));
  m->layers.resize(hp.n_layer);
  for (int il = 0; il < hp.n_layer; ++il) {
    LayerStack::Layer& L = m->layers[il];
    AttentionBlock& a = L.attn;
    a = DecoderAttention(hp, il, variant.honours_attention_scale ? attn_scale : 0.0);
    a.rope = &m->rope;
    CAIRN_LOAD_ASSIGN(L.mixer_norm, ld.Vector(BlockTensor(il, "attn_norm.weight"), n_embd));
    CAIRN_LOAD_ASSIGN(L.ffn_norm, ld.Vector(BlockTensor(il, "ffn_norm.weight"), n_embd));
    CAIRN_RETURN_IF_ERROR(LoadAttention(ld, il, n_embd, variant.tensors, a));
    if (variant.moe != nullptr) {
      CAIRN_LOAD_ASSIGN(L.moe, LoadMoe(ld, il, n_embd, *variant.moe));
    } else {
      CAIRN_LOAD_ASSIGN(L.ffn, LoadGluFfn(ld, il, n_embd, hp.n_ff[il], FfnActivation::kSilu));
    }
  }
  m->FinishLoad(ld, {.n_ctx_train = hp.n_ctx_train});
  return std::unique_ptr<ArchModel>(std::move(m));
}

absl::StatusOr<std::unique_ptr<ArchModel>> LoadLlama(const ModelLoader& loader) {
  LlamaVariant v;
  v.honours_attention_scale = true;
  return LoadLlamaStyle(loader, v);
}

}  // namespace cairn
