#include "service/programs/demo_models.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/model/gguf_writer.h"
#include "service/programs/xorshift_rng.h"

namespace cairn::service {
namespace {

using Rng = XorShiftRng;

constexpr const char* kWords[] = {
    "the", "a", "and", "to", "of", "in", "was", "he", "she", "it", "they", "said", "once",
    "upon", "time", "there", "little", "big", "girl", "boy", "dog", "cat", "bird", "tree",
    "sun", "moon", "day", "night", "happy", "sad", "went", "saw", "found", "played", "ran",
    "home", "friend", "mom", "dad", "park", "ball", "red", "blue", "green", "small", "very",
    "with", "on", "for", "but", "so", "then", "one", "all", "her", "his", "had", "were",
    "is", "not", "wanted", "liked", "looked", "toy", "box", "car", "house", "water", "sky",
    "star", "fish", "flower", "cake", "book", "hat", "shoe", "door", "road", "hill", "river",
    "king", "queen", "dragon", "cloud", "rain", "snow", "wind", "stone", "bear", "fox",
    "owl", "frog", "apple", "bread", "song", "dance", "smile", "laugh", "jump", "fly", "swim",
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

// The usual ChatML (Qwen) Jinja template. cairn recognises its family by the
// markers and renders it natively (backends/model/chat_template.h).
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
std::vector<float> OutputRows(const Vocab& v, int64_t n_embd, float scale, Rng& rng) {
  std::vector<float> out(static_cast<size_t>(n_embd) * v.tokens.size(), 0.0f);
  auto fill = [&](size_t t, float s) {
    for (int64_t i = 0; i < n_embd; ++i) out[t * n_embd + i] = rng.Uniform(-s, s);
  };
  for (size_t t = v.first_piece; t < v.end_piece; ++t) fill(t, scale);
  if (v.im_end >= 0) fill(static_cast<size_t>(v.im_end), kImEndScale * scale);
  return out;
}

absl::StatusOr<DemoModel> Finish(GgufWriter& w, const std::string& name) {
  std::vector<uint8_t> bytes = w.Serialize();
  auto file = ModelFile::FromBuffer(bytes, name);
  if (!file.ok()) return file.status();
  return DemoModel{name, std::shared_ptr<const ModelFile>(std::move(*file))};
}

// A llama-architecture transformer; with `chatml`, its vocabulary has the
// ChatML control tokens and its metadata the ChatML template.
absl::StatusOr<DemoModel> BuildTransformer(const std::string& name, bool chatml = false) {
  const Vocab v = BuildVocab(chatml);
  const int64_t embd = 64, ff = 192, vocab = static_cast<int64_t>(v.tokens.size());
  const int32_t layers = 2, heads = 4, kv_heads = 2;
  GgufWriter w;
  Rng rng;
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", name);
  w.SetUint32("llama.context_length", 4096);
  w.SetUint32("llama.embedding_length", embd);
  w.SetUint32("llama.block_count", layers);
  w.SetUint32("llama.feed_forward_length", ff);
  w.SetUint32("llama.attention.head_count", heads);
  w.SetUint32("llama.attention.head_count_kv", kv_heads);
  w.SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetFloat32("llama.rope.freq_base", 10000.0f);
  AddTokenizer(w, v);
  const int64_t kv = embd / heads * kv_heads;
  const float a = 1.0f / std::sqrt(static_cast<float>(embd));
  const float af = 1.0f / std::sqrt(static_cast<float>(ff));
  std::vector<float> ones(embd, 1.0f);
  w.AddF32Tensor("token_embd.weight", {embd, vocab}, rng.Vec(embd * vocab, -1.0f, 1.0f));
  w.AddF32Tensor("output_norm.weight", {embd}, ones);
  w.AddF32Tensor("output.weight", {embd, vocab}, OutputRows(v, embd, 0.6f, rng));
  for (int32_t l = 0; l < layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    w.AddF32Tensor(p + "attn_norm.weight", {embd}, ones);
    w.AddF32Tensor(p + "ffn_norm.weight", {embd}, ones);
    w.AddF32Tensor(p + "attn_q.weight", {embd, embd}, rng.Vec(embd * embd, -a, a));
    w.AddF32Tensor(p + "attn_k.weight", {embd, kv}, rng.Vec(embd * kv, -a, a));
    w.AddF32Tensor(p + "attn_v.weight", {embd, kv}, rng.Vec(embd * kv, -a, a));
    w.AddF32Tensor(p + "attn_output.weight", {embd, embd}, rng.Vec(embd * embd, -a, a));
    w.AddF32Tensor(p + "ffn_gate.weight", {embd, ff}, rng.Vec(embd * ff, -a, a));
    w.AddF32Tensor(p + "ffn_up.weight", {embd, ff}, rng.Vec(embd * ff, -a, a));
    w.AddF32Tensor(p + "ffn_down.weight", {ff, embd}, rng.Vec(ff * embd, -af, af));
  }
  return Finish(w, name);
}

absl::StatusOr<DemoModel> BuildRecurrent(const std::string& name) {
  const Vocab v = BuildVocab();
  const int64_t n_embd = 64, n_layer = 2, d_state = 16, n_head = 4, n_group = 1, d_conv = 4;
  const int64_t n_vocab = static_cast<int64_t>(v.tokens.size());
  const int64_t d_inner = 2 * n_embd;
  const int64_t conv_ch = d_inner + 2 * n_group * d_state;
  const int64_t in_proj = 2 * d_inner + 2 * n_group * d_state + n_head;
  GgufWriter w;
  const std::string a = "mamba2";
  w.SetString("general.architecture", a);
  w.SetString("general.name", name);
  w.SetUint32(a + ".context_length", 1 << 20);
  w.SetUint32(a + ".embedding_length", n_embd);
  w.SetUint32(a + ".block_count", n_layer);
  w.SetFloat32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetUint32(a + ".ssm.conv_kernel", d_conv);
  w.SetUint32(a + ".ssm.inner_size", d_inner);
  w.SetUint32(a + ".ssm.state_size", d_state);
  w.SetUint32(a + ".ssm.time_step_rank", n_head);
  w.SetUint32(a + ".ssm.group_count", n_group);
  AddTokenizer(w, v);
  Rng rng;
  const float in_scale = 1.0f / std::sqrt(static_cast<float>(n_embd));
  const float out_scale = 1.0f / std::sqrt(static_cast<float>(d_inner));
  w.AddF32Tensor("token_embd.weight", {n_embd, n_vocab}, rng.Vec(n_embd * n_vocab, -1.0f, 1.0f));
  w.AddF32Tensor("output_norm.weight", {n_embd}, std::vector<float>(n_embd, 1.0f));
  w.AddF32Tensor("output.weight", {n_embd, n_vocab}, OutputRows(v, n_embd, 0.6f, rng));
  for (int64_t l = 0; l < n_layer; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    w.AddF32Tensor(p + "attn_norm.weight", {n_embd}, std::vector<float>(n_embd, 1.0f));
    w.AddF32Tensor(p + "ssm_in.weight", {n_embd, in_proj}, rng.Vec(n_embd * in_proj, -in_scale, in_scale));
    w.AddF32Tensor(p + "ssm_conv1d.weight", {d_conv, conv_ch}, rng.Vec(d_conv * conv_ch, -0.5f, 0.5f));
    w.AddF32Tensor(p + "ssm_conv1d.bias", {conv_ch}, rng.Vec(conv_ch, -0.1f, 0.1f));
    w.AddF32Tensor(p + "ssm_dt.bias", {n_head}, rng.Vec(n_head, -4.0f, -2.0f));
    w.AddF32Tensor(p + "ssm_a", {1, n_head}, rng.Vec(n_head, -8.0f, -1.0f));
    w.AddF32Tensor(p + "ssm_d", {1, n_head}, std::vector<float>(n_head, 1.0f));
    w.AddF32Tensor(p + "ssm_norm.weight", {d_inner / n_group, n_group}, std::vector<float>(d_inner, 1.0f));
    w.AddF32Tensor(p + "ssm_out.weight", {d_inner, n_embd}, rng.Vec(d_inner * n_embd, -out_scale, out_scale));
  }
  return Finish(w, name);
}

// A Granite-4-style hybrid: Mamba-2 layers with one attention layer in
// four.
absl::StatusOr<DemoModel> BuildHybrid(const std::string& name, int64_t E, int64_t n_layer, int64_t n_ff) {
  const Vocab v = BuildVocab();
  const int64_t n_head = 4, n_head_kv = 2, head_dim = E / n_head;
  const int64_t d_inner = 2 * E, d_state = 16, heads = 4, groups = 1, d_conv = 4;
  const int64_t conv_ch = d_inner + 2 * groups * d_state;
  const int64_t in_proj = 2 * d_inner + 2 * groups * d_state + heads;
  const int64_t n_vocab = static_cast<int64_t>(v.tokens.size());
  GgufWriter w;
  const std::string a = "granitehybrid";
  w.SetString("general.architecture", a);
  w.SetString("general.name", name);
  w.SetUint32(a + ".context_length", 8192);
  w.SetUint32(a + ".embedding_length", E);
  w.SetUint32(a + ".block_count", n_layer);
  w.SetUint32(a + ".feed_forward_length", n_ff);
  w.SetUint32(a + ".attention.head_count", n_head);
  w.SetFloat32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  w.SetUint32(a + ".ssm.conv_kernel", d_conv);
  std::vector<int32_t> kv(n_layer);
  for (int64_t l = 0; l < n_layer; ++l) kv[l] = (l % 4 == 3) ? static_cast<int32_t>(n_head_kv) : 0;
  w.SetInt32Array(a + ".attention.head_count_kv", kv);
  w.SetFloat32(a + ".attention.scale", 1.0f / static_cast<float>(head_dim));
  w.SetFloat32(a + ".embedding_scale", 1.0f);
  w.SetFloat32(a + ".residual_scale", 0.5f);
  w.SetFloat32(a + ".logit_scale", 1.0f);
  w.SetBool(a + ".rope.scaling.finetuned", false);
  w.SetUint32(a + ".ssm.inner_size", d_inner);
  w.SetUint32(a + ".ssm.state_size", d_state);
  w.SetUint32(a + ".ssm.time_step_rank", heads);
  w.SetUint32(a + ".ssm.group_count", groups);
  AddTokenizer(w, v);
  Rng rng;
  auto matrix = [&](const std::string& n, int64_t n_in, int64_t n_out) {
    const float sc = 1.0f / std::sqrt(static_cast<float>(n_in));
    w.AddF32Tensor(n, {n_in, n_out}, rng.Vec(n_in * n_out, -sc, sc));
  };
  auto ones = [&](const std::string& n, std::vector<int64_t> shape) {
    int64_t k = 1;
    for (int64_t d : shape) k *= d;
    w.AddF32Tensor(n, std::move(shape), std::vector<float>(static_cast<size_t>(k), 1.0f));
  };
  w.AddF32Tensor("token_embd.weight", {E, n_vocab}, rng.Vec(E * n_vocab, -1.0f, 1.0f));
  ones("output_norm.weight", {E});
  w.AddF32Tensor("output.weight", {E, n_vocab}, OutputRows(v, E, 0.6f, rng));
  for (int64_t l = 0; l < n_layer; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    ones(p + "attn_norm.weight", {E});
    ones(p + "ffn_norm.weight", {E});
    if (kv[l] == 0) {
      matrix(p + "ssm_in.weight", E, in_proj);
      matrix(p + "ssm_out.weight", d_inner, E);
      w.AddF32Tensor(p + "ssm_conv1d.weight", {d_conv, conv_ch}, rng.Vec(d_conv * conv_ch, -0.5f, 0.5f));
      w.AddF32Tensor(p + "ssm_conv1d.bias", {conv_ch}, rng.Vec(conv_ch, -0.1f, 0.1f));
      w.AddF32Tensor(p + "ssm_dt.bias", {heads}, rng.Vec(heads, -4.0f, -2.0f));
      w.AddF32Tensor(p + "ssm_a", {1, heads}, rng.Vec(heads, -8.0f, -1.0f));
      ones(p + "ssm_d", {1, heads});
      ones(p + "ssm_norm.weight", {d_inner / groups, groups});
    } else {
      matrix(p + "attn_q.weight", E, n_head * head_dim);
      matrix(p + "attn_k.weight", E, n_head_kv * head_dim);
      matrix(p + "attn_v.weight", E, n_head_kv * head_dim);
      matrix(p + "attn_output.weight", n_head * head_dim, E);
    }
    matrix(p + "ffn_gate.weight", E, n_ff);
    matrix(p + "ffn_up.weight", E, n_ff);
    matrix(p + "ffn_down.weight", n_ff, E);
  }
  return Finish(w, name);
}

// A Qwen3.5-MoE-style hybrid (qwen35moe): Gated DeltaNet layers and gated
// attention every second layer, each with a mixture of 8 SwiGLU experts (2
// used) and a sigmoid-gated shared expert.
absl::StatusOr<DemoModel> BuildMoe(const std::string& name) {
  const Vocab v = BuildVocab();
  const int64_t E = 64, n_layer = 4, n_head = 4, n_head_kv = 2, hd = 16;
  const int64_t k_heads = 2, v_heads = 4, d_state = 16, d_conv = 4;
  const int64_t n_expert = 8, n_used = 2, n_ff_exp = 64, n_ff_shexp = 64;
  const int64_t key_dim = k_heads * d_state, value_dim = v_heads * d_state, conv_ch = 2 * key_dim + value_dim;
  const int64_t n_vocab = static_cast<int64_t>(v.tokens.size());
  GgufWriter w;
  const std::string a = "qwen35moe";
  w.SetString("general.architecture", a);
  w.SetString("general.name", name);
  w.SetUint32(a + ".context_length", 8192);
  w.SetUint32(a + ".embedding_length", E);
  w.SetUint32(a + ".block_count", n_layer);
  w.SetUint32(a + ".attention.head_count", n_head);
  w.SetUint32(a + ".attention.head_count_kv", n_head_kv);
  w.SetUint32(a + ".attention.key_length", hd);
  w.SetUint32(a + ".attention.value_length", hd);
  w.SetFloat32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  w.SetUint32(a + ".full_attention_interval", 2);
  w.SetUint32(a + ".rope.dimension_count", 8);
  w.SetInt32Array(a + ".rope.dimension_sections", {2, 1, 1, 0});
  w.SetFloat32(a + ".rope.freq_base", 1e7f);
  w.SetUint32(a + ".ssm.conv_kernel", d_conv);
  w.SetUint32(a + ".ssm.group_count", k_heads);
  w.SetUint32(a + ".ssm.time_step_rank", v_heads);
  w.SetUint32(a + ".ssm.state_size", d_state);
  w.SetUint32(a + ".ssm.inner_size", value_dim);
  w.SetUint32(a + ".expert_count", n_expert);
  w.SetUint32(a + ".expert_used_count", n_used);
  w.SetUint32(a + ".expert_feed_forward_length", n_ff_exp);
  w.SetUint32(a + ".expert_shared_feed_forward_length", n_ff_shexp);
  AddTokenizer(w, v);
  Rng rng;
  auto tensor = [&](const std::string& n, std::vector<int64_t> shape, float scale) {
    int64_t k = 1;
    for (int64_t d : shape) k *= d;
    w.AddF32Tensor(n, std::move(shape), rng.Vec(k, -scale, scale));
  };
  auto matrix = [&](const std::string& n, std::vector<int64_t> shape) {
    tensor(n, shape, 1.0f / std::sqrt(static_cast<float>(shape[0])));
  };
  auto ones = [&](const std::string& n, int64_t k) { w.AddF32Tensor(n, {k}, std::vector<float>(k, 1.0f)); };
  w.AddF32Tensor("token_embd.weight", {E, n_vocab}, rng.Vec(E * n_vocab, -1.0f, 1.0f));
  ones("output_norm.weight", E);
  w.AddF32Tensor("output.weight", {E, n_vocab}, OutputRows(v, E, 0.6f, rng));
  for (int64_t l = 0; l < n_layer; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    ones(p + "attn_norm.weight", E);
    ones(p + "post_attention_norm.weight", E);
    if (l % 2 == 0) {
      matrix(p + "attn_qkv.weight", {E, conv_ch});
      matrix(p + "attn_gate.weight", {E, value_dim});
      tensor(p + "ssm_conv1d.weight", {d_conv, conv_ch}, 0.5f);
      w.AddF32Tensor(p + "ssm_dt.bias", {v_heads}, rng.Vec(v_heads, -1.0f, 1.0f));
      w.AddF32Tensor(p + "ssm_a", {v_heads}, rng.Vec(v_heads, -2.0f, -0.5f));
      matrix(p + "ssm_beta.weight", {E, v_heads});
      matrix(p + "ssm_alpha.weight", {E, v_heads});
      ones(p + "ssm_norm.weight", d_state);
      matrix(p + "ssm_out.weight", {value_dim, E});
    } else {
      matrix(p + "attn_q.weight", {E, 2 * n_head * hd});
      matrix(p + "attn_k.weight", {E, n_head_kv * hd});
      matrix(p + "attn_v.weight", {E, n_head_kv * hd});
      matrix(p + "attn_output.weight", {n_head * hd, E});
      ones(p + "attn_q_norm.weight", hd);
      ones(p + "attn_k_norm.weight", hd);
    }
    tensor(p + "ffn_gate_inp.weight", {E, n_expert}, 1.0f);
    matrix(p + "ffn_gate_exps.weight", {E, n_ff_exp, n_expert});
    matrix(p + "ffn_up_exps.weight", {E, n_ff_exp, n_expert});
    matrix(p + "ffn_down_exps.weight", {n_ff_exp, E, n_expert});
    tensor(p + "ffn_gate_inp_shexp.weight", {E}, 0.5f);
    matrix(p + "ffn_gate_shexp.weight", {E, n_ff_shexp});
    matrix(p + "ffn_up_shexp.weight", {E, n_ff_shexp});
    matrix(p + "ffn_down_shexp.weight", {n_ff_shexp, E});
  }
  return Finish(w, name);
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
