// cairn-model: inspect GGUF model files.
//   cairn-model info FILE                 architecture, hyperparameters, tokenizer, tensors
//   cairn-model dequant FILE TENSOR OUT   tensor values as raw little-endian float32
// Errors go to stderr; the exit status is non-zero on any failure.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backends/model/dequant.h"
#include "backends/model/gguf.h"

namespace cairn {
namespace {

constexpr const char* kUsage =
    "usage:\n"
    "  cairn-model info FILE\n"
    "  cairn-model dequant FILE TENSOR OUT\n";

std::string ShapeString(const TensorInfo& t) { return absl::StrCat("[", absl::StrJoin(t.shape, ", "), "]"); }

int Info(const ModelFile& model) {
  const Metadata& md = model.metadata();
  absl::StatusOr<std::string> arch = model.Architecture();
  std::printf("file:          %s\n", model.path().c_str());
  std::printf("gguf version:  %u (%zu file%s), alignment %llu\n", model.files().front()->version(),
              model.files().size(), model.files().size() == 1 ? "" : "s",
              static_cast<unsigned long long>(model.files().front()->alignment()));
  std::printf("architecture:  %s\n", arch.ok() ? arch->c_str() : "(none)");
  if (absl::StatusOr<std::string> name = md.GetString("general.name"); name.ok()) {
    std::printf("name:          %s\n", name->c_str());
  }

  std::printf("\nhyperparameters:\n");
  const std::string prefix = arch.ok() ? *arch + "." : "";
  for (const auto& [key, value] : md.entries()) {
    const bool hparam = !prefix.empty() && absl::StartsWith(key, prefix);
    const bool general = absl::StartsWith(key, "general.") || absl::StartsWith(key, "split.");
    if (hparam || general) std::printf("  %-44s %s\n", key.c_str(), value.ToString().c_str());
  }

  std::printf("\ntokenizer:\n");
  absl::StatusOr<std::string> tok_model = md.GetString("tokenizer.ggml.model");
  std::printf("  %-44s %s\n", "model", tok_model.ok() ? tok_model->c_str() : "(none)");
  if (const MetadataValue* pre = md.Find("tokenizer.ggml.pre")) {
    std::printf("  %-44s %s\n", "pre-tokenizer", pre->ToString().c_str());
  }
  if (const MetadataValue* tokens = md.Find("tokenizer.ggml.tokens")) {
    std::printf("  %-44s %zu\n", "vocabulary size", tokens->array_size());
  }
  if (const MetadataValue* merges = md.Find("tokenizer.ggml.merges")) {
    std::printf("  %-44s %zu\n", "merges", merges->array_size());
  }
  for (const auto& [key, value] : md.entries()) {
    if (absl::StartsWith(key, "tokenizer.ggml.") &&
        (absl::EndsWith(key, "_token_id") || absl::StartsWith(key, "tokenizer.ggml.add_"))) {
      std::printf("  %-44s %s\n", key.substr(15).c_str(), value.ToString().c_str());
    }
  }
  if (md.Has("tokenizer.chat_template")) std::printf("  %-44s %s\n", "chat template", "present");

  std::printf("\ntensors (%zu):\n", model.tensors().size());
  std::printf("  %-40s %-6s %-24s %12s\n", "name", "type", "shape", "bytes");
  uint64_t total = 0;
  for (const TensorInfo* t : model.tensors()) {
    std::printf("  %-40s %-6s %-24s %12llu\n", t->name.c_str(), std::string(TypeName(t->type)).c_str(),
                ShapeString(*t).c_str(), static_cast<unsigned long long>(t->n_bytes));
    total += t->n_bytes;
  }
  std::printf("  total %llu bytes\n", static_cast<unsigned long long>(total));
  return 0;
}

int Dequant(const ModelFile& model, const std::string& tensor_name, const std::string& out_path) {
  absl::StatusOr<const TensorInfo*> t = model.GetTensor(tensor_name);
  if (!t.ok()) {
    std::fprintf(stderr, "cairn-model: %s\n", std::string(t.status().message()).c_str());
    return 1;
  }
  const std::vector<float> values = DequantizeTensor(**t);
  std::ofstream out(out_path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4));
  out.close();
  if (!out) {
    std::fprintf(stderr, "cairn-model: cannot write '%s'\n", out_path.c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %zu float32 values of %s %s (%s) to %s\n", values.size(), tensor_name.c_str(),
               ShapeString(**t).c_str(), std::string(TypeName((*t)->type)).c_str(), out_path.c_str());
  return 0;
}

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string command = argv[1];
  const bool info = command == "info" && argc == 3;
  const bool dequant = command == "dequant" && argc == 5;
  if (!info && !dequant) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  absl::StatusOr<std::unique_ptr<ModelFile>> model = ModelFile::Open(argv[2]);
  if (!model.ok()) {
    std::fprintf(stderr, "cairn-model: %s: %s\n", std::string(absl::StatusCodeToString(model.status().code())).c_str(),
                 std::string(model.status().message()).c_str());
    return 1;
  }
  return info ? Info(**model) : Dequant(**model, argv[3], argv[4]);
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) { return cairn::Main(argc, argv); }
