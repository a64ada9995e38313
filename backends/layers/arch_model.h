// An architecture as the backend runs it: an ArchModel computes a forward
// pass and tells its shape; an architecture's wiring file
// (backends/<family>/<arch>.cc) is an ArchLoader, which reads the file's
// hyperparameters and tensors into the ArchModel every architecture uses,
// the LayerStack (layer_stack.h; backends/README.md says why one). The
// family the loader is registered to decides its memory (backends/memory/),
// the shared backend (layered_backend.h) runs it.
//
// Contract:
// - A loader reads the file through a ModelLoader and returns the model
//   with its shape filled in; INVALID_ARGUMENT (naming the key or tensor)
//   for a malformed file, UNIMPLEMENTED for a variant not supported. The
//   model keeps pointers into the ModelFile, which must outlive it.
// - Forward absorbs the pass's rows into the memories (through the blocks)
//   and writes the logits of the wanted rows (ForwardPass::Logits). Forward
//   calls are serialized by the backend; the wiring keeps no per-call state
//   beyond what the pass and the memories hold.
// - Attention slots and recurrent slots are numbered 0 .. n-1 by the wiring,
//   in the counts its shape declares.
#ifndef CAIRN_BACKENDS_LAYERS_ARCH_MODEL_H_
#define CAIRN_BACKENDS_LAYERS_ARCH_MODEL_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "backends/kernels/rope.h"
#include "backends/layers/forward_pass.h"
#include "backends/layers/model_loading.h"
#include "backends/model/gguf.h"

namespace cairn {

// What an architecture tells its family and ModelInfo.
struct ArchShape {
  std::string arch;  // general.architecture
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_ctx_train = 0;
  bool accepts_embeddings = false;  // Forward takes embedding chunks (M-RoPE)
  size_t weight_bytes = 0;          // weights read per forward token
  // Attention memory: slots with a full K/V cache, slots with a sliding-
  // window ring (after the full ones), and each slot's K/V row widths
  // (n_full_slots + n_window_slots entries, in slot order).
  int32_t n_full_slots = 0;
  int32_t n_window_slots = 0;
  int32_t window = 0;  // of the window slots
  std::vector<KvWidth> kv_widths;
  // Recurrent memory: slots of conv_floats + state_floats floats each.
  int32_t n_recurrent_slots = 0;
  int64_t conv_floats = 0;
  int64_t state_floats = 0;
};

class ArchModel {
 public:
  ArchModel() = default;
  ArchModel(const ArchModel&) = delete;  // blocks point into the model (PositionEncoding)
  ArchModel& operator=(const ArchModel&) = delete;
  virtual ~ArchModel() = default;

  const ArchShape& shape() const { return shape_; }
  virtual void Forward(ForwardPass& pass) const = 0;

 protected:
  // The shape's vocabulary and widths: arch, n_vocab (token_embd's rows),
  // n_embd (their width) and n_ctx_train.
  void SetVocabulary(const ModelLoader& loader, const TensorInfo& token_embd, int32_t n_ctx_train) {
    shape_.arch = loader.arch();
    shape_.n_vocab = static_cast<int32_t>(token_embd.n_rows());
    shape_.n_embd = static_cast<int32_t>(token_embd.shape[0]);
    shape_.n_ctx_train = n_ctx_train;
  }

  ArchShape shape_;
};

using ArchLoader = absl::StatusOr<std::unique_ptr<ArchModel>> (*)(const ModelLoader& loader);

// An architecture registered to a family.
struct ArchEntry {
  absl::string_view name;
  ArchLoader load;
};

// The names of `archs`, for BackendRegistry::Register.
std::vector<std::string> ArchNames(std::span<const ArchEntry> archs);

// The wiring of `model`'s general.architecture among `archs`:
// INVALID_ARGUMENT "architecture 'x' is not served by the <family> family"
// when it is not one of them, or the loader's error. With `packer`, its
// matrices are packed (ModelLoader::For).
absl::StatusOr<std::unique_ptr<ArchModel>> LoadArch(std::span<const ArchEntry> archs, const ModelFile& model,
                                                    absl::string_view family, PackedWeights* packer = nullptr);

// --- Load steps most architectures share.

// The hyperparameters of an attention-based decoder ("<arch>.*" keys).
struct DecoderHParams {
  int64_t n_embd = 0;              // embedding_length
  int32_t n_layer = 0;             // block_count minus nextn_predict_layers (MTP blocks are not run)
  int32_t n_head = 0;              // attention.head_count of layer 0 (the reference's default for head sizes)
  std::vector<int64_t> n_heads;    // attention.head_count per layer
  int32_t n_ctx_train = 0;         // context_length, or the architecture's default
  float eps = 0.0f;                // attention.layer_norm_rms_epsilon
  std::vector<int64_t> n_head_kv;  // attention.head_count_kv per layer (default head_count; 0 marks a
                                   // recurrent layer in some hybrids)
  std::vector<int64_t> n_ff;       // feed_forward_length per layer (0s when absent)
  int32_t head_dim_k = 0;          // attention.key_length, default n_embd / n_head
  int32_t head_dim_v = 0;          // attention.value_length, default head_dim_k
};
absl::StatusOr<DecoderHParams> ReadDecoderHParams(const ModelLoader& loader, int64_t default_context);

// Which head counts an architecture takes per layer. A file may give
// attention.head_count and head_count_kv as per-layer arrays; the reference
// honours each layer's value only in some architectures (granitehybrid,
// nemotron_h and deci both counts, jamba and lfm2 the K/V heads) and reads
// layer 0's everywhere else.
struct HeadCountRule {
  bool per_layer_heads = false;
  bool per_layer_kv_heads = false;
};

// Checks the head counts of the attention layers `layers` (every layer when
// empty): each has a positive head_count and a positive head_count_kv that
// divides it, and where `rule` takes one count, every such layer declares
// the same. INVALID_ARGUMENT naming the key and the layer otherwise. After
// it, hp.n_heads[il] and hp.n_head_kv[il] are the counts of attention layer
// il whatever the rule.
absl::Status CheckHeadCounts(const ModelLoader& loader, const DecoderHParams& hp, HeadCountRule rule,
                             const std::vector<int32_t>& layers = {});

// token_embd.weight: rows of n_embd values, its row count the vocabulary.
absl::StatusOr<const TensorInfo*> LoadTokenEmbedding(const ModelLoader& loader, int64_t n_embd);

// The final norm (`norm_name`, [n_embd]) and output.weight, or the token
// embedding when the file has no output.weight (tied output).
absl::StatusOr<OutputHead> LoadOutputHead(const ModelLoader& loader, const TensorInfo& token_embd, float eps,
                                          const std::string& norm_name = "output_norm.weight");

// Which layers attend over a sliding window of `window` positions (none when
// window is 0): attention.sliding_window_pattern as a per-layer array
// (nonzero: local), or as a period P (default `default_period`) making layer
// il local iff il % P < P - 1 (P = 0: every layer), the reference's rule.
absl::StatusOr<std::vector<bool>> ReadSlidingWindowLayers(const ModelLoader& loader, int32_t n_layer, int64_t window,
                                                          int64_t default_period);

// Rotary encoding from "<arch>.rope.*": dimension_count (default head_dim;
// even and at most head_dim), freq_base (default 10000), scaling.type
// linear, none or yarn (scaling.factor or scale_linear; YaRN with
// scaling.original_context_length, default context_length, and the
// reference's default betas 32 and 1), scaling.attn_factor (default 1), and
// the optional rope_freqs.weight factors. UNIMPLEMENTED for other scaling
// types.
absl::StatusOr<RopeParams> ReadRope(const ModelLoader& loader, RopeType type, int32_t head_dim);

}  // namespace cairn

#endif  // CAIRN_BACKENDS_LAYERS_ARCH_MODEL_H_
