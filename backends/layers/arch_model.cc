#include "backends/layers/arch_model.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace cairn {

std::vector<std::string> ArchNames(std::span<const ArchEntry> archs) {
  std::vector<std::string> out;
  for (const ArchEntry& a : archs) out.emplace_back(a.name);
  return out;
}

absl::StatusOr<std::unique_ptr<ArchModel>> LoadArch(std::span<const ArchEntry> archs, const ModelFile& model,
                                                    absl::string_view family, PackedWeights* packer) {
  absl::StatusOr<ModelLoader> loader = ModelLoader::For(model, packer);
  if (!loader.ok()) return loader.status();
  for (const ArchEntry& entry : archs) {
    if (entry.name == loader->arch()) return entry.load(*loader);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("architecture '", loader->arch(), "' is not served by the ", family, " family"));
}

absl::StatusOr<DecoderHParams> ReadDecoderHParams(const ModelLoader& ld, int64_t default_context) {
  constexpr int64_t kMaxDim = int64_t{1} << 20;
  DecoderHParams hp;
  int64_t v = 0, blocks = 0, nextn = 0;
  CAIRN_LOAD_ASSIGN(hp.n_embd, ld.IntIn("embedding_length", 1, kMaxDim));
  CAIRN_LOAD_ASSIGN(blocks, ld.IntIn("block_count", 1, 4096));
  CAIRN_LOAD_ASSIGN(nextn, ld.IntInOr("nextn_predict_layers", 0, blocks - 1, 0));
  hp.n_layer = static_cast<int32_t>(blocks - nextn);
  CAIRN_LOAD_ASSIGN(hp.n_heads, ld.PerLayer("attention.head_count", hp.n_layer));
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    if (hp.n_heads[il] < 0 || hp.n_heads[il] > 4096 || (il == 0 && hp.n_heads[il] == 0)) {
      return ld.Error(
          absl::StrCat(ld.Key("attention.head_count"), " of layer ", il, " is out of range (", hp.n_heads[il], ")"));
    }
  }
  hp.n_head = static_cast<int32_t>(hp.n_heads[0]);
  CAIRN_LOAD_ASSIGN(v, ld.IntInOr("context_length", 1, int64_t{1} << 30, default_context));
  hp.n_ctx_train = static_cast<int32_t>(v);
  double eps = 0;
  CAIRN_LOAD_ASSIGN(eps, ld.Float("attention.layer_norm_rms_epsilon"));
  hp.eps = static_cast<float>(eps);
  hp.n_head_kv = hp.n_heads;  // absent: one K/V head per query head, as the reference reads it
  if (ld.HasKey("attention.head_count_kv")) {
    CAIRN_LOAD_ASSIGN(hp.n_head_kv, ld.PerLayer("attention.head_count_kv", hp.n_layer));
  }
  hp.n_ff.assign(hp.n_layer, 0);  // absent in some MoE files
  if (ld.HasKey("feed_forward_length")) CAIRN_LOAD_ASSIGN(hp.n_ff, ld.PerLayer("feed_forward_length", hp.n_layer));
  for (int64_t f : hp.n_ff) {
    if (f < 0 || f > kMaxDim) return ld.Error(absl::StrCat("feed_forward_length ", f, " is out of range"));
  }
  CAIRN_LOAD_ASSIGN(v, ld.IntInOr("attention.key_length", 1, 4096, hp.n_embd / hp.n_head));
  hp.head_dim_k = static_cast<int32_t>(v);
  CAIRN_LOAD_ASSIGN(v, ld.IntInOr("attention.value_length", 1, 4096, hp.head_dim_k));
  hp.head_dim_v = static_cast<int32_t>(v);
  return hp;
}

absl::Status CheckHeadCounts(const ModelLoader& ld, const DecoderHParams& hp, HeadCountRule rule,
                             const std::vector<int32_t>& layers) {
  const std::string heads_key = ld.Key("attention.head_count"), kv_key = ld.Key("attention.head_count_kv");
  const int32_t n = layers.empty() ? hp.n_layer : static_cast<int32_t>(layers.size());
  const int32_t first = layers.empty() ? 0 : layers[0];
  for (int32_t i = 0; i < n; ++i) {
    const int32_t il = layers.empty() ? i : layers[i];
    const int64_t heads = hp.n_heads[il], kv = hp.n_head_kv[il];
    if (heads <= 0) return ld.Error(absl::StrCat(heads_key, " of attention layer ", il, " is ", heads));
    if (kv <= 0 || kv > heads || heads % kv != 0) {
      return ld.Error(
          absl::StrCat(kv_key, " of layer ", il, " is ", kv, ", which does not divide its ", heads_key, " ", heads));
    }
    // The reference sizes every layer by layer 0's counts in these architectures.
    if (!rule.per_layer_heads && heads != hp.n_heads[first]) {
      return ld.Error(absl::StrCat(heads_key, " of layer ", il, " is ", heads, ", of layer ", first, " ",
                                   hp.n_heads[first], ": the ", ld.arch(), " architecture takes one count"));
    }
    if (!rule.per_layer_kv_heads && kv != hp.n_head_kv[first]) {
      return ld.Error(absl::StrCat(kv_key, " of layer ", il, " is ", kv, ", of layer ", first, " ", hp.n_head_kv[first],
                                   ": the ", ld.arch(), " architecture takes one count"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<const TensorInfo*> LoadTokenEmbedding(const ModelLoader& ld, int64_t n_embd) {
  const TensorInfo* t = ld.file().FindTensor("token_embd.weight");
  if (t == nullptr) return ld.Error("tensor 'token_embd.weight' is missing");
  if (t->shape.size() < 2 || t->shape[0] != n_embd || t->n_rows() <= 0 ||
      t->n_rows() > std::numeric_limits<int32_t>::max()) {
    return ld.Error(absl::StrCat("token_embd.weight rows are not n_embd (", n_embd, ") wide"));
  }
  return t;
}

absl::StatusOr<OutputHead> LoadOutputHead(const ModelLoader& ld, const TensorInfo& token_embd, float eps,
                                          const std::string& norm_name) {
  const int64_t n_embd = token_embd.shape[0];
  OutputHead head;
  head.eps = eps;
  CAIRN_LOAD_ASSIGN(head.norm, ld.Vector(norm_name, n_embd));
  if (ld.HasTensor("output.weight")) {
    CAIRN_LOAD_ASSIGN(head.output, ld.Matrix("output.weight", n_embd, token_embd.n_rows()));
  } else {
    head.output = WeightMatrix::FromTensor(token_embd);  // tied output
  }
  return head;
}

absl::StatusOr<std::vector<bool>> ReadSlidingWindowLayers(const ModelLoader& ld, int32_t n_layer, int64_t window,
                                                          int64_t default_period) {
  std::vector<bool> local(n_layer, false);
  if (window == 0) return local;
  if (ld.IsArray("attention.sliding_window_pattern"))
    return ld.PerLayerFlags("attention.sliding_window_pattern", n_layer);
  int64_t period = 0;
  CAIRN_LOAD_ASSIGN(period, ld.IntOr("attention.sliding_window_pattern", default_period));
  if (period < 0) return ld.Error("negative sliding_window_pattern");
  for (int32_t il = 0; il < n_layer; ++il) local[il] = period == 0 || il % period < period - 1;
  return local;
}

absl::StatusOr<RopeParams> ReadRope(const ModelLoader& ld, RopeType type, int32_t head_dim) {
  RopeParams rope;
  rope.type = type;
  int64_t n_dims = 0;
  CAIRN_LOAD_ASSIGN(n_dims, ld.IntOr("rope.dimension_count", head_dim));
  if (n_dims <= 0 || n_dims > head_dim || n_dims % 2 != 0) {
    return ld.Error(absl::StrCat("rope.dimension_count ", n_dims, " does not fit head dim ", head_dim));
  }
  rope.n_dims = static_cast<int32_t>(n_dims);
  double base = 0;
  CAIRN_LOAD_ASSIGN(base, ld.FloatOr("rope.freq_base", 10000.0));
  rope.freq_base = static_cast<float>(base);
  std::string scaling;
  CAIRN_LOAD_ASSIGN(scaling, ld.StringOr("rope.scaling.type", "linear"));
  if (scaling != "linear" && scaling != "none" && scaling != "yarn") {
    return absl::UnimplementedError(absl::StrCat("model '", ld.file().path(), "': rope scaling '", scaling,
                                                 "' is not supported (linear, yarn, none)"));
  }
  double factor = 0;
  CAIRN_LOAD_ASSIGN(factor, ld.FloatOr("rope.scaling.factor", 0.0));
  if (factor == 0.0) CAIRN_LOAD_ASSIGN(factor, ld.FloatOr("rope.scale_linear", 0.0));  // older files
  if (factor < 0.0) return ld.Error("negative rope scaling factor");
  rope.freq_scale = (scaling == "none" || factor == 0.0) ? 1.0f : static_cast<float>(1.0 / factor);
  double attn_factor = 0;
  CAIRN_LOAD_ASSIGN(attn_factor, ld.FloatOr("rope.scaling.attn_factor", 1.0));
  rope.attn_factor = static_cast<float>(attn_factor);
  if (scaling == "yarn") {
    int64_t n_ctx_train = 0;
    CAIRN_LOAD_ASSIGN(n_ctx_train, ld.IntInOr("context_length", 1, int64_t{1} << 30, 4096));
    int64_t orig = 0;
    CAIRN_LOAD_ASSIGN(orig, ld.IntInOr("rope.scaling.original_context_length", 1, int64_t{1} << 30, n_ctx_train));
    rope.ext_factor = 1.0f;
    rope.yarn_orig_ctx = static_cast<int32_t>(orig);
    // The magnitude the reference's context computes (0.1 ln(factor) + 1,
    // times the file's attn_factor) divided by the one its kernel applies
    // again: ~1, but in the same float steps (llama_context's yarn_attn_factor).
    const float f = 1.0f / rope.freq_scale;
    const float mscale = f <= 1.0f ? 1.0f : 0.1f * std::log(f) + 1.0f;
    rope.attn_factor = mscale * (1.0f / (1.0f + 0.1f * std::log(f))) * static_cast<float>(attn_factor);
  }
  CAIRN_LOAD_ASSIGN(rope.freq_factors, ld.OptionalVector("rope_freqs.weight", rope.n_dims / 2));
  return rope;
}

}  // namespace cairn
