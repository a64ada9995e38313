// mamba: every layer x += mixer(RMSNorm(x)) with a Mamba-1 mixer (selective
// scan with per-channel A, dt from a low-rank projection, optional RMS norms
// of dt, B and C), then the final norm and the output head (tied when the
// file has no output.weight). mamba2 uses the same wiring (mamba2.cc).
#include <algorithm>
#include <limits>

#include "backends/layers/layer_stack.h"
#include "backends/recurrent/mamba.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadMambaStack(const ModelLoader& ld, MambaVersion version) {
  auto m = std::make_unique<LayerStack>();
  CAIRN_LOAD_ASSIGN(m->mamba, ReadMambaGeometry(ld, version));
  const MambaGeometry& g = m->mamba;
  int64_t n_layer = 0, n_ctx = 0;
  CAIRN_LOAD_ASSIGN(n_layer, ld.IntIn("block_count", 1, 4096));
  CAIRN_LOAD_ASSIGN(n_ctx, ld.IntOr("context_length", 0));
  m->eps = g.rms_eps;
  CAIRN_LOAD_ASSIGN(m->tok_embd, LoadTokenEmbedding(ld, g.n_embd));
  CAIRN_LOAD_ASSIGN(m->head, LoadOutputHead(ld, *m->tok_embd, g.rms_eps));
  m->layers.resize(n_layer);
  for (int il = 0; il < n_layer; ++il) {
    LayerStack::Layer& L = m->layers[il];
    L.mixer = LayerStack::Mixer::kMamba;
    CAIRN_LOAD_ASSIGN(L.mixer_norm, ld.Vector(BlockTensor(il, "attn_norm.weight"), g.n_embd));
    CAIRN_LOAD_ASSIGN(L.mamba, LoadMambaMixer(ld, g, il));
  }
  const int32_t n_ctx_train = static_cast<int32_t>(std::clamp<int64_t>(n_ctx, 0, std::numeric_limits<int32_t>::max()));
  m->FinishLoad(
      ld, {.n_ctx_train = n_ctx_train, .conv_floats = g.conv_state_floats(), .state_floats = g.ssm_state_floats()});
  return std::unique_ptr<ArchModel>(std::move(m));
}

absl::StatusOr<std::unique_ptr<ArchModel>> LoadMamba(const ModelLoader& loader) {
  return LoadMambaStack(loader, MambaVersion::kMamba1);
}

}  // namespace cairn
