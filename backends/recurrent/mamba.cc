// mamba: every layer x += mixer(RMSNorm(x)) with a Mamba-1 mixer (selective
// scan with per-channel A, dt from a low-rank projection, optional RMS norms
// of dt, B and C), then the final norm and the output head (tied when the
// file has no output.weight). mamba2 uses the same wiring (mamba2.cc).
#include <algorithm>
#include <limits>

#include "backends/recurrent/mamba.h"

namespace cairn {
namespace {

class MambaModel final : public ArchModel {
 public:
  absl::Status Load(const ModelLoader& ld, MambaVersion version);
  void Forward(ForwardPass& pass) const override;

 private:
  struct Layer {
    std::vector<float> norm;
    MambaMixerWeights mixer;
  };

  MambaGeometry geometry_;
  const TensorInfo* tok_embd_ = nullptr;
  OutputHead head_;
  std::vector<Layer> layers_;
};

absl::Status MambaModel::Load(const ModelLoader& ld, MambaVersion version) {
  CAIRN_LOAD_ASSIGN(geometry_, ReadMambaGeometry(ld, version));
  const MambaGeometry& g = geometry_;
  int64_t n_layer = 0, n_ctx = 0;
  CAIRN_LOAD_ASSIGN(n_layer, ld.IntIn("block_count", 1, 4096));
  CAIRN_LOAD_ASSIGN(n_ctx, ld.IntOr("context_length", 0));
  CAIRN_LOAD_ASSIGN(tok_embd_, LoadTokenEmbedding(ld, g.n_embd));
  CAIRN_LOAD_ASSIGN(head_, LoadOutputHead(ld, *tok_embd_, g.rms_eps));
  size_t weight_bytes = head_.output.bytes();
  layers_.resize(n_layer);
  for (int il = 0; il < n_layer; ++il) {
    CAIRN_LOAD_ASSIGN(layers_[il].norm, ld.Vector(BlockTensor(il, "attn_norm.weight"), g.n_embd));
    CAIRN_LOAD_ASSIGN(layers_[il].mixer, LoadMambaMixer(ld, g, il));
    weight_bytes += layers_[il].mixer.matrix_bytes();
  }

  SetVocabulary(ld, *tok_embd_, static_cast<int32_t>(std::clamp<int64_t>(n_ctx, 0, std::numeric_limits<int32_t>::max())));
  shape_.weight_bytes = weight_bytes;
  shape_.n_recurrent_slots = static_cast<int32_t>(n_layer);
  shape_.conv_floats = g.conv_state_floats();
  shape_.state_floats = g.ssm_state_floats();
  return absl::OkStatus();
}

void MambaModel::Forward(ForwardPass& pass) const {
  pass.Embed(*tok_embd_);
  float* out = pass.BlockOut();
  for (size_t il = 0; il < layers_.size(); ++il) {
    const Layer& L = layers_[il];
    MambaMixerForward(geometry_, L.mixer, pass.RecurrentRuns(static_cast<int32_t>(il)),
                      pass.Normed(L.norm, geometry_.rms_eps), pass.n_rows(), out, pass.pool(), pass.precision(),
                      pass.buffers());
    pass.AddResidual(out);
  }
  pass.Logits(head_);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ArchModel>> LoadMambaStack(const ModelLoader& loader, MambaVersion version) {
  return MakeArch<MambaModel>(loader, version);
}

absl::StatusOr<std::unique_ptr<ArchModel>> LoadMamba(const ModelLoader& loader) {
  return LoadMambaStack(loader, MambaVersion::kMamba1);
}

}  // namespace cairn
