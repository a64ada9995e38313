#include "service/programs/demo_models.h"

#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/model/gguf_writer.h"
#include "synthetic/architectures.h"

namespace cairn::service {
namespace {

constexpr const char* kWords[] = {
    "the",    "a",     "and",    "to",    "of",     "in",   "was",   "he",    "she",   "it",     "they",   "said",
    "once",   "upon",  "time",   "there", "little", "big",  "girl",  "boy",   "dog",   "cat",    "bird",   "tree",
    "sun",    "moon",  "day",    "night", "happy",  "sad",  "went",  "saw",   "found", "played", "ran",    "home",
    "friend", "mom",   "dad",    "park",  "ball",   "red",  "blue",  "green", "small", "very",   "with",   "on",
    "for",    "but",   "so",     "then",  "one",    "all",  "her",   "his",   "had",   "were",   "is",     "not",
    "wanted", "liked", "looked", "toy",   "box",    "car",  "house", "water", "sky",   "star",   "fish",   "flower",
    "cake",   "book",  "hat",    "shoe",  "door",   "road", "hill",  "river", "king",  "queen",  "dragon", "cloud",
    "rain",   "snow",  "wind",   "stone", "bear",   "fox",  "owl",   "frog",  "apple", "bread",  "song",   "dance",
    "smile",  "laugh", "jump",   "fly",   "swim",
};

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  size_t first_piece = 0;  // tokens before this are control and byte tokens
  size_t end_piece = 0;    // word pieces are [first_piece, end_piece)
  int32_t im_start = -1;   // ChatML control tokens (after the pieces), or -1
  int32_t im_end = -1;
};

// The usual ChatML (Qwen) Jinja template; cairn runs it as the model's own
// (chat/chat_template.h).
constexpr const char* kChatMLTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}";

// SPM vocabulary: <unk> <s> </s>, 256 byte tokens, then every prefix of
// "▁word" and each ASCII letter and punctuation mark, longer pieces scored
// higher so that words merge whole. With `chatml`, the control tokens
// <|im_start|> and <|im_end|> follow (as added tokens do in Qwen's vocabulary).
Vocab BuildVocab(bool chatml = false) {
  Vocab v;
  auto add = [&](std::string t, float score, int32_t type) {
    v.tokens.push_back(std::move(t));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0, 2);
  add("<s>", 0, 3);
  add("</s>", 0, 3);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    add(buf, 0, 6);
  }
  v.first_piece = v.tokens.size();
  std::set<std::string> seen;
  auto piece = [&](const std::string& t) {
    if (seen.insert(t).second) add(t, static_cast<float>(t.size()) - 20.0f, 1);
  };
  const std::string sp = "\xE2\x96\x81";  // ▁
  piece(sp);
  for (char c = 'a'; c <= 'z'; ++c) piece(std::string(1, c));
  for (char c = 'A'; c <= 'Z'; ++c) piece(std::string(1, c));
  for (const char* p : {".", ",", "!", "?", "'", "\"", "0", "1", "2", "3"}) piece(p);
  for (const char* p : {".", ",", "!", "?"}) piece(sp + p);
  for (const char* w : kWords) {
    const std::string word = sp + w;
    for (size_t len = sp.size() + 1; len <= word.size(); ++len) piece(word.substr(0, len));
    const std::string cap = sp + std::string(1, static_cast<char>(w[0] - 'a' + 'A')) + (w + 1);
    for (size_t len = sp.size() + 1; len <= cap.size(); ++len) piece(cap.substr(0, len));
  }
  v.end_piece = v.tokens.size();
  if (chatml) {
    v.im_start = static_cast<int32_t>(v.tokens.size());
    add("<|im_start|>", 0, 3);
    v.im_end = static_cast<int32_t>(v.tokens.size());
    add("<|im_end|>", 0, 3);
  }
  return v;
}

void AddTokenizer(GgufWriter& w, const Vocab& v) {
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", v.tokens);
  w.SetFloat32Array("tokenizer.ggml.scores", v.scores);
  w.SetInt32Array("tokenizer.ggml.token_type", v.types);
  w.SetUint32("tokenizer.ggml.bos_token_id", 1);
  // A ChatML model ends its turn with <|im_end|>, its EOS as in Qwen's
  // instruct models (the tokenizer also treats <|im_end|> as end of
  // generation by its text, as llama.cpp does).
  w.SetUint32("tokenizer.ggml.eos_token_id", v.im_end >= 0 ? static_cast<uint32_t>(v.im_end) : 2);
  w.SetUint32("tokenizer.ggml.unknown_token_id", 0);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  if (v.im_start >= 0) w.SetString("tokenizer.chat_template", kChatMLTemplate);
}

// Scale of <|im_end|>'s output row relative to the word pieces'.
constexpr float kImEndScale = 1.3f;

// Output rows: control and byte tokens get zero rows (logit 0) and word
// pieces large random rows, so sampled text is mostly words, not stray bytes.
// <|im_end|> gets a random row too, so that a chat reply can end.
synthetic::Init OutputRows(const Vocab& v, float scale) {
  std::vector<float> half_widths(v.tokens.size(), 0.0f);
  for (size_t t = v.first_piece; t < v.end_piece; ++t) half_widths[t] = scale;
  if (v.im_end >= 0) half_widths[static_cast<size_t>(v.im_end)] = kImEndScale * scale;
  return synthetic::Init::RowUniform(std::move(half_widths));
}

// `model` with the demo vocabulary's tokenizer and output rows, opened as `name`.
absl::StatusOr<DemoModel> Finish(synthetic::SyntheticModel model, const std::string& name, const Vocab& v) {
  model.metadata().SetString("general.name", name);
  AddTokenizer(model.metadata(), v);
  model.Find("output.weight")->init = OutputRows(v, 0.6f);
  absl::StatusOr<std::shared_ptr<const ModelFile>> file = model.Open(name);
  if (!file.ok()) return file.status();
  return DemoModel{name, *std::move(file)};
}

// A llama-architecture transformer (the builder's default shape); with
// `chatml`, its vocabulary has the ChatML control tokens and its metadata
// the ChatML template.
absl::StatusOr<DemoModel> BuildTransformer(const std::string& name, bool chatml = false) {
  const Vocab v = BuildVocab(chatml);
  return Finish(synthetic::Llama({.n_vocab = static_cast<int64_t>(v.tokens.size())}), name, v);
}

// A Mamba-2 (the builder's default shape).
absl::StatusOr<DemoModel> BuildRecurrent(const std::string& name) {
  const Vocab v = BuildVocab();
  return Finish(synthetic::Mamba2({.n_vocab = static_cast<int64_t>(v.tokens.size())}), name, v);
}

// A Granite-4-style hybrid: Mamba-2 layers with one attention layer in
// four.
absl::StatusOr<DemoModel> BuildHybrid(const std::string& name, int64_t n_embd, int32_t n_layer, int64_t n_ff) {
  const Vocab v = BuildVocab();
  return Finish(
      synthetic::GraniteHybrid(
          {.n_embd = n_embd, .n_ff = n_ff, .n_vocab = static_cast<int64_t>(v.tokens.size()), .n_layer = n_layer}),
      name, v);
}

// A Qwen3.5-MoE-style hybrid (qwen35moe): Gated DeltaNet layers and gated
// attention every second layer, each with a mixture of 8 SwiGLU experts (2
// used) and a sigmoid-gated shared expert.
absl::StatusOr<DemoModel> BuildMoe(const std::string& name) {
  const Vocab v = BuildVocab();
  return Finish(synthetic::Qwen35({.n_vocab = static_cast<int64_t>(v.tokens.size()),
                                   .n_expert = 8,
                                   .n_expert_used = 2,
                                   .n_ff_expert = 64,
                                   .n_ff_shared = 64}),
                name, v);
}

}  // namespace

std::vector<std::string> DemoModelNames() {
  return {"demo-transformer", "demo-recurrent", "demo-hybrid", "demo-chat", "demo-moe"};
}

absl::StatusOr<std::shared_ptr<const ModelFile>> OpenModelOrDemo(const std::string& path) {
  if (IsDemoModel(path)) {
    absl::StatusOr<DemoModel> demo = BuildDemoModel(path);
    if (!demo.ok()) return demo.status();
    return demo->file;
  }
  absl::StatusOr<std::unique_ptr<ModelFile>> file = ModelFile::Open(path);
  if (!file.ok()) return file.status();
  return std::shared_ptr<const ModelFile>(std::move(*file));
}

bool IsDemoModel(const std::string& name) {
  for (const std::string& n : DemoModelNames()) {
    if (n == name) return true;
  }
  return name == "demo-hybrid-large";
}

absl::StatusOr<DemoModel> BuildDemoModel(const std::string& name) {
  if (name == "demo-transformer") return BuildTransformer(name);
  if (name == "demo-recurrent") return BuildRecurrent(name);
  if (name == "demo-hybrid") return BuildHybrid(name, 64, 4, 128);
  if (name == "demo-chat") return BuildTransformer(name, /*chatml=*/true);
  if (name == "demo-moe") return BuildMoe(name);
  // Large enough (about 140 MB of F32 weights) that a decode step is bound by
  // reading the weights, as with real models: for batching measurements.
  if (name == "demo-hybrid-large") return BuildHybrid(name, 512, 8, 1536);
  return absl::NotFoundError(absl::StrCat("no built-in model named '", name, "'"));
}

}  // namespace cairn::service
