// Built-in synthetic models: deterministic random weights built in memory
// with GgufWriter, one per backend family compiled in plus a ChatML chat
// model, each with a small SPM vocabulary of English words. They let `cairn-server` start on a fresh
// machine with no model file; their text is meaningless.
#ifndef CAIRN_SERVICE_PROGRAMS_DEMO_MODELS_H_
#define CAIRN_SERVICE_PROGRAMS_DEMO_MODELS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/model/gguf.h"

namespace cairn::service {

struct DemoModel {
  std::string name;  // e.g. "demo-transformer"
  std::shared_ptr<const ModelFile> file;
};

// The names DemoModel can build: "demo-transformer" (llama),
// "demo-recurrent" (mamba2), "demo-hybrid" (granitehybrid: Mamba-2 layers
// and one attention layer in four), "demo-chat" (demo-transformer's shape
// with the ChatML control tokens <|im_start|> and <|im_end|> in its
// vocabulary, <|im_end|> as EOS, and the ChatML template in
// tokenizer.chat_template), "demo-moe" (qwen35moe: Gated DeltaNet and gated
// attention layers, each with a mixture of 8 experts, 2 used, and a shared
// expert).
std::vector<std::string> DemoModelNames();

// DemoModelNames() plus "demo-hybrid-large" (same shape, n_embd 512, 8
// layers: weight-read bound, for benchmarks; never served by default).
bool IsDemoModel(const std::string& name);

// Builds one (the same bytes on every call and machine). NOT_FOUND for an
// unknown name.
absl::StatusOr<DemoModel> BuildDemoModel(const std::string& name);

// The model a --model path names: the built-in model when the path is one
// of their names (IsDemoModel), else the GGUF file there (ModelFile::Open's
// errors).
absl::StatusOr<std::shared_ptr<const ModelFile>> OpenModelOrDemo(const std::string& path);

}  // namespace cairn::service

#endif  // CAIRN_SERVICE_PROGRAMS_DEMO_MODELS_H_
