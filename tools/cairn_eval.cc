// cairn-eval: runs a model through any registered backend family.
//
//   cairn-eval --model FILE --tokens TOKENS --out LOGITS [--mode batch|step|chunk:N]
//              [--compare REF_LOGITS] [--family NAME] [--threads N] [--exact-activations]
//   cairn-eval --model FILE --generate N --prompt-tokens "1 2 3"
//   cairn-eval --model FILE --multimodal SPEC --embeddings FILE --out LOGITS [--compare REF]
//
// TOKENS: one sequence per line, space-separated ids. LOGITS (and REF_LOGITS):
// per sequence int32 n_tokens, int32 n_vocab, float32[n_tokens][n_vocab].
// --compare prints max |diff| / std(reference) and argmax agreement and
// fails (exit 1) on a shape mismatch. --multimodal reads the golden/multimodal
// format (SPEC: "T id ..." text runs and "I nx ny" image chunks, EMBEDDINGS:
// raw float32 rows of n_embd), feeds each part as one Forward and writes the
// logits of every row as one sequence of the LOGITS format.
// --exact-activations keeps F32 activations in every product (what the
// golden files hold); by default quantized weights take 8-bit activations
// (BackendOptions::exact_activations).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "backends/backend.h"
#include "backends/register_builtin.h"
#include "tools/eval_lib.h"

namespace {

int Usage(const char* msg) {
  std::fprintf(stderr,
               "error: %s\nusage: cairn-eval --model FILE --tokens TOKENS --out LOGITS "
               "[--mode batch|step|chunk:N] [--compare REF] [--family NAME] [--threads N]\n"
               "       [--exact-activations] [--no-pack-weights]\n"
               "       cairn-eval --model FILE --generate N --prompt-tokens \"1 2 3\"\n"
               "       cairn-eval --model FILE --multimodal SPEC --embeddings FILE --out LOGITS [--compare REF]\n",
               msg);
  return 2;
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) return Usage(("unexpected argument '" + a + "'").c_str());
    std::string key = a.substr(2), value;
    if (key == "exact-activations" || key == "no-pack-weights") {  // the flags without a value
      args[key] = "";
      continue;
    }
    if (size_t eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return Usage(("missing value for --" + key).c_str());
    }
    args[key] = value;
  }
  static const char* kKnown[] = {"model",
                                 "tokens",
                                 "out",
                                 "mode",
                                 "compare",
                                 "family",
                                 "threads",
                                 "generate",
                                 "prompt-tokens",
                                 "max-context",
                                 "multimodal",
                                 "embeddings",
                                 "exact-activations",
                                 "no-pack-weights"};
  for (const auto& [k, v] : args) {
    bool known = false;
    for (const char* name : kKnown) known |= (k == name);
    if (!known) return Usage(("unknown flag --" + k).c_str());
  }
  if (!args.count("model")) return Usage("--model is required");

  cairn::BackendRegistry registry;
  if (absl::Status s = cairn::RegisterBuiltinBackends(registry); !s.ok()) return Fail(s);
  absl::StatusOr<std::unique_ptr<cairn::ModelFile>> model = cairn::ModelFile::Open(args["model"]);
  if (!model.ok()) return Fail(model.status());
  cairn::BackendOptions options;
  options.exact_activations = args.count("exact-activations") > 0;
  options.pack_weights = args.count("no-pack-weights") == 0;
  if (args.count("threads") && !absl::SimpleAtoi(args["threads"], &options.n_threads)) {
    return Usage("--threads takes an integer");
  }
  if (args.count("max-context") && !absl::SimpleAtoi(args["max-context"], &options.max_context)) {
    return Usage("--max-context takes an integer");
  }
  absl::StatusOr<std::unique_ptr<cairn::Backend>> backend =
      registry.Create(std::shared_ptr<const cairn::ModelFile>(std::move(*model)), options, args["family"]);
  if (!backend.ok()) return Fail(backend.status());

  if (args.count("generate")) {
    int32_t n = 0;
    if (!absl::SimpleAtoi(args["generate"], &n) || n < 0) return Usage("--generate takes a count >= 0");
    if (!args.count("prompt-tokens")) return Usage("--generate needs --prompt-tokens");
    absl::StatusOr<std::vector<cairn::TokenId>> prompt = cairn::ParseTokenList(args["prompt-tokens"]);
    if (!prompt.ok()) return Fail(prompt.status());
    absl::StatusOr<std::vector<cairn::TokenId>> ids = cairn::GenerateGreedy(**backend, *prompt, n);
    if (!ids.ok()) return Fail(ids.status());
    for (size_t i = 0; i < ids->size(); ++i) std::printf(i ? " %d" : "%d", (*ids)[i]);
    std::printf("\n");
    return 0;
  }

  if (args.count("multimodal")) {
    if (!args.count("embeddings") || !args.count("out")) return Usage("--multimodal needs --embeddings and --out");
    absl::StatusOr<std::vector<cairn::PromptPart>> parts = cairn::ReadMultimodalSpec(args["multimodal"]);
    if (!parts.ok()) return Fail(parts.status());
    absl::StatusOr<std::vector<float>> embd = cairn::ReadEmbeddingsFile(args["embeddings"], (*backend)->info().n_embd);
    if (!embd.ok()) return Fail(embd.status());
    absl::StatusOr<cairn::SequenceLogits> l = cairn::EvalMultimodal(**backend, *parts, *embd);
    if (!l.ok()) return Fail(l.status());
    std::vector<cairn::SequenceLogits> logits{std::move(*l)};
    if (absl::Status s = cairn::WriteLogitsFile(args["out"], logits); !s.ok()) return Fail(s);
    if (args.count("compare")) {
      absl::StatusOr<std::vector<cairn::SequenceLogits>> ref = cairn::ReadLogitsFile(args["compare"]);
      if (!ref.ok()) return Fail(ref.status());
      absl::StatusOr<cairn::LogitsComparison> c = cairn::CompareAll(logits, *ref);
      if (!c.ok()) return Fail(c.status());
      std::printf("max|diff| %.3g  std %.4g  max|diff|/std %.3g  argmax %lld/%lld\n", c->max_abs_diff, c->ref_std,
                  c->max_rel, static_cast<long long>(c->argmax_agree), static_cast<long long>(c->rows));
    }
    return 0;
  }

  if (!args.count("tokens") || !args.count("out")) return Usage("--tokens and --out are required");
  absl::StatusOr<cairn::EvalMode> mode = cairn::EvalMode::Parse(args.count("mode") ? args["mode"] : "batch");
  if (!mode.ok()) return Usage(std::string(mode.status().message()).c_str());
  absl::StatusOr<std::vector<std::vector<cairn::TokenId>>> seqs = cairn::ReadTokenFile(args["tokens"]);
  if (!seqs.ok()) return Fail(seqs.status());
  absl::StatusOr<std::vector<cairn::SequenceLogits>> evaluated = cairn::EvalSequences(**backend, *seqs, *mode);
  if (!evaluated.ok()) return Fail(evaluated.status());
  const std::vector<cairn::SequenceLogits>& logits = *evaluated;
  if (absl::Status s = cairn::WriteLogitsFile(args["out"], logits); !s.ok()) return Fail(s);
  if (args.count("compare")) {
    absl::StatusOr<std::vector<cairn::SequenceLogits>> ref = cairn::ReadLogitsFile(args["compare"]);
    if (!ref.ok()) return Fail(ref.status());
    absl::StatusOr<cairn::LogitsComparison> c = cairn::CompareAll(logits, *ref);
    if (!c.ok()) return Fail(c.status());
    std::printf("max|diff| %.3g  std %.4g  max|diff|/std %.3g  argmax %lld/%lld\n", c->max_abs_diff, c->ref_std,
                c->max_rel, static_cast<long long>(c->argmax_agree), static_cast<long long>(c->rows));
  }
  return 0;
}
