// deci (DeciLM, Llama-3.1-Nemotron-51B): the llama wiring whose layers each
// declare their own attention.head_count, head_count_kv and
// feed_forward_length (per-layer arrays), as the reference honours them.
// The reference also serves layers with no attention (head_count 0), a
// "linear attention" (head_count_kv 0: the output projection alone) or no
// FFN (feed_forward_length 0); those are refused as UNIMPLEMENTED here.
#include "absl/strings/str_cat.h"
#include "backends/transformer/llama.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<ArchModel>> LoadDeci(const ModelLoader& loader) {
  DecoderHParams hp;
  CAIRN_LOAD_ASSIGN(hp, ReadDecoderHParams(loader, 2048));
  for (int32_t il = 0; il < hp.n_layer; ++il) {
    if (hp.n_heads[il] == 0 || hp.n_head_kv[il] == 0 || hp.n_ff[il] == 0) {
      return absl::UnimplementedError(absl::StrCat("model '", loader.file().path(), "': deci layer ", il,
                                                   " has no attention, a linear attention or no FFN (head_count ",
                                                   hp.n_heads[il], ", head_count_kv ", hp.n_head_kv[il],
                                                   ", feed_forward_length ", hp.n_ff[il], "): not supported"));
    }
  }
  LlamaVariant v;
  v.heads = HeadCountRule{.per_layer_heads = true, .per_layer_kv_heads = true};
  return LoadLlamaStyle(loader, v);
}

}  // namespace cairn
