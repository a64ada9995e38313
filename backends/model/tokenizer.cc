#include "backends/model/tokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "backends/model/tokenizer_vocab.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(const ModelFile& model) {
  return FromMetadata(model.metadata());
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromMetadata(const Metadata& metadata) {
  auto model = metadata.GetString("tokenizer.ggml.model");
  if (!model.ok()) return model.status();
  // llama.cpp's names for a file without a vocabulary (served for token ids).
  if (*model == "none" || *model == "no_vocab") {
    return absl::NotFoundError(absl::StrFormat("the model has no tokenizer (tokenizer.ggml.model '%s')", *model));
  }
  if (*model == "llama") return tokenizer_internal::CreateSpmTokenizer(metadata);
  if (*model == "gpt2") return tokenizer_internal::CreateBpeTokenizer(metadata);
  return absl::UnimplementedError(
      absl::StrFormat("tokenizer model '%s' (tokenizer.ggml.model) is not supported; cairn implements "
                      "'llama' (SPM) and 'gpt2' (byte-level BPE)",
                      *model));
}

}  // namespace cairn
