#include "synthetic/architectures.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace cairn::synthetic {
namespace {

std::string Blk(int64_t layer, const char* name) { return absl::StrCat("blk.", layer, ".", name); }

// The metadata every decoder carries.
void SetDecoderKeys(SyntheticModel& m, uint32_t n_ctx, int64_t n_embd, int64_t n_layer) {
  GgufWriter& w = m.metadata();
  w.SetUint32(m.Key("context_length"), n_ctx);
  w.SetUint32(m.Key("embedding_length"), static_cast<uint32_t>(n_embd));
  w.SetUint32(m.Key("block_count"), static_cast<uint32_t>(n_layer));
}

// The keys of a decoder's attention: feed_forward_length (unless n_ff is 0),
// head counts and the norms' epsilon.
void SetAttentionKeys(SyntheticModel& m, int64_t n_ff, int64_t n_head, int64_t n_head_kv, float eps) {
  GgufWriter& w = m.metadata();
  if (n_ff > 0) w.SetUint32(m.Key("feed_forward_length"), static_cast<uint32_t>(n_ff));
  w.SetUint32(m.Key("attention.head_count"), static_cast<uint32_t>(n_head));
  w.SetUint32(m.Key("attention.head_count_kv"), static_cast<uint32_t>(n_head_kv));
  w.SetFloat32(m.Key("attention.layer_norm_rms_epsilon"), eps);
}

// token_embd (uniform in +-1), output_norm and, unless tied, output.weight.
void AddEmbeddingAndHead(SyntheticModel& m, int64_t n_embd, int64_t n_vocab, bool tied_output) {
  m.AddWeight("token_embd.weight", {n_embd, n_vocab}, Init::Symmetric(1.0f));
  m.AddOnes("output_norm.weight", {n_embd});
  if (!tied_output) m.AddWeight("output.weight", {n_embd, n_vocab});
}

// attn_{q,k,v,output}: q of q_rows rows (twice the heads' width when gated).
void AddAttention(SyntheticModel& m, int64_t layer, int64_t n_embd, int64_t q_rows, int64_t kv_rows, int64_t o_in) {
  m.AddWeight(Blk(layer, "attn_q.weight"), {n_embd, q_rows});
  m.AddWeight(Blk(layer, "attn_k.weight"), {n_embd, kv_rows});
  m.AddWeight(Blk(layer, "attn_v.weight"), {n_embd, kv_rows});
  m.AddWeight(Blk(layer, "attn_output.weight"), {o_in, n_embd});
}

void AddSwiGlu(SyntheticModel& m, int64_t layer, int64_t n_embd, int64_t n_ff) {
  m.AddWeight(Blk(layer, "ffn_gate.weight"), {n_embd, n_ff});
  m.AddWeight(Blk(layer, "ffn_up.weight"), {n_embd, n_ff});
  m.AddWeight(Blk(layer, "ffn_down.weight"), {n_ff, n_embd});
}

// The ssm.* keys of a Mamba-2 mixer.
void SetMamba2Keys(SyntheticModel& m, int64_t d_inner, int64_t d_state, int64_t n_head, int64_t n_group) {
  GgufWriter& w = m.metadata();
  w.SetUint32(m.Key("ssm.inner_size"), static_cast<uint32_t>(d_inner));
  w.SetUint32(m.Key("ssm.state_size"), static_cast<uint32_t>(d_state));
  w.SetUint32(m.Key("ssm.time_step_rank"), static_cast<uint32_t>(n_head));
  w.SetUint32(m.Key("ssm.group_count"), static_cast<uint32_t>(n_group));
}

// A Mamba-2 mixer's conv, dt, A, D and grouped norm: the small tensors,
// after its projections or between them as the caller orders them.
void AddMamba2Small(SyntheticModel& m, int64_t layer, int64_t d_conv, int64_t conv_ch, int64_t n_head, int64_t d_inner,
                    int64_t n_group) {
  m.Add(Blk(layer, "ssm_conv1d.weight"), {d_conv, conv_ch}, Init::Symmetric(0.5f));
  m.Add(Blk(layer, "ssm_conv1d.bias"), {conv_ch}, Init::Symmetric(0.1f));
  m.Add(Blk(layer, "ssm_dt.bias"), {n_head}, Init::Uniform(-4.0f, -2.0f));
  m.Add(Blk(layer, "ssm_a"), {1, n_head}, Init::Uniform(-8.0f, -1.0f));
  m.AddOnes(Blk(layer, "ssm_d"), {1, n_head});
  m.AddOnes(Blk(layer, "ssm_norm.weight"), {d_inner / n_group, n_group});
}

}  // namespace

SyntheticModel Llama(const LlamaShape& s) {
  SyntheticModel m(s.arch);
  SetDecoderKeys(m, s.n_ctx, s.n_embd, s.n_layer);
  SetAttentionKeys(m, s.n_ff, s.n_head, s.n_head_kv, s.eps);
  m.metadata().SetFloat32(m.Key("rope.freq_base"), s.rope_base);
  const int64_t head_dim = s.n_embd / s.n_head, q = head_dim * s.n_head, kv = head_dim * s.n_head_kv;
  AddEmbeddingAndHead(m, s.n_embd, s.n_vocab, s.tied_output);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    m.AddOnes(Blk(l, "attn_norm.weight"), {s.n_embd});
    m.AddOnes(Blk(l, "ffn_norm.weight"), {s.n_embd});
    AddAttention(m, l, s.n_embd, q, kv, q);
    AddSwiGlu(m, l, s.n_embd, s.n_ff);
    if (s.qkv_bias) {
      m.Add(Blk(l, "attn_q.bias"), {q}, Init::Symmetric(0.5f));
      m.Add(Blk(l, "attn_k.bias"), {kv}, Init::Symmetric(0.5f));
      m.Add(Blk(l, "attn_v.bias"), {kv}, Init::Symmetric(0.5f));
    }
    if (s.qk_norm) {
      m.AddOnes(Blk(l, "attn_q_norm.weight"), {head_dim});
      m.AddOnes(Blk(l, "attn_k_norm.weight"), {head_dim});
    }
  }
  return m;
}

SyntheticModel Gemma(const GemmaShape& s) {
  SyntheticModel m(s.arch);
  SetDecoderKeys(m, s.n_ctx, s.n_embd, s.n_layer);
  SetAttentionKeys(m, s.n_ff, s.n_head, s.n_head_kv, s.eps);
  GgufWriter& w = m.metadata();
  w.SetUint32(m.Key("attention.key_length"), static_cast<uint32_t>(s.head_dim));
  w.SetUint32(m.Key("attention.value_length"), static_cast<uint32_t>(s.head_dim));
  w.SetUint32(m.Key("attention.sliding_window"), static_cast<uint32_t>(s.window));
  if (s.pattern > 0) w.SetUint32(m.Key("attention.sliding_window_pattern"), static_cast<uint32_t>(s.pattern));
  w.SetFloat32(m.Key("rope.freq_base"), s.rope_base);
  if (s.rope_base_swa >= 0) w.SetFloat32(m.Key("rope.freq_base_swa"), s.rope_base_swa);
  const int64_t q = s.n_head * s.head_dim, kv = s.n_head_kv * s.head_dim;
  AddEmbeddingAndHead(m, s.n_embd, s.n_vocab, /*tied_output=*/true);
  for (int64_t l = 0; l < s.n_layer; ++l) {
    for (const char* norm :
         {"attn_norm.weight", "post_attention_norm.weight", "ffn_norm.weight", "post_ffw_norm.weight"}) {
      m.AddOnes(Blk(l, norm), {s.n_embd});
    }
    if (s.qk_norm) {
      m.AddOnes(Blk(l, "attn_q_norm.weight"), {s.head_dim});
      m.AddOnes(Blk(l, "attn_k_norm.weight"), {s.head_dim});
    }
    AddAttention(m, l, s.n_embd, q, kv, q);
    AddSwiGlu(m, l, s.n_embd, s.n_ff);
  }
  return m;
}

SyntheticModel Mamba(const MambaShape& s) {
  SyntheticModel m("mamba");
  SetDecoderKeys(m, s.n_ctx, s.n_embd, s.n_layer);
  GgufWriter& w = m.metadata();
  w.SetFloat32(m.Key("attention.layer_norm_rms_epsilon"), s.eps);
  w.SetUint32(m.Key("ssm.conv_kernel"), static_cast<uint32_t>(s.d_conv));
  w.SetUint32(m.Key("ssm.inner_size"), static_cast<uint32_t>(s.d_inner));
  w.SetUint32(m.Key("ssm.state_size"), static_cast<uint32_t>(s.d_state));
  w.SetUint32(m.Key("ssm.time_step_rank"), static_cast<uint32_t>(s.dt_rank));
  w.SetBool(m.Key("ssm.dt_b_c_rms"), s.dt_b_c_rms);
  AddEmbeddingAndHead(m, s.n_embd, s.n_vocab, /*tied_output=*/false);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    m.AddOnes(Blk(l, "attn_norm.weight"), {s.n_embd});
    m.AddWeight(Blk(l, "ssm_in.weight"), {s.n_embd, 2 * s.d_inner});
    m.Add(Blk(l, "ssm_conv1d.weight"), {s.d_conv, s.d_inner}, Init::Symmetric(0.5f));
    m.Add(Blk(l, "ssm_conv1d.bias"), {s.d_inner}, Init::Symmetric(0.1f));
    m.AddWeight(Blk(l, "ssm_x.weight"), {s.d_inner, s.dt_rank + 2 * s.d_state});
    m.AddWeight(Blk(l, "ssm_dt.weight"), {s.dt_rank, s.d_inner});
    m.Add(Blk(l, "ssm_dt.bias"), {s.d_inner}, Init::Uniform(-2.0f, 0.0f));
    m.Add(Blk(l, "ssm_a"), {s.d_state, s.d_inner}, Init::Uniform(-2.0f, -0.2f));
    m.AddOnes(Blk(l, "ssm_d"), {s.d_inner});
    m.AddWeight(Blk(l, "ssm_out.weight"), {s.d_inner, s.n_embd});
  }
  return m;
}

SyntheticModel Mamba2(const Mamba2Shape& s) {
  SyntheticModel m("mamba2");
  SetDecoderKeys(m, s.n_ctx, s.n_embd, s.n_layer);
  const int64_t d_inner = s.inner(), conv_ch = s.conv_channels(), in_proj = s.in_proj();
  GgufWriter& w = m.metadata();
  w.SetFloat32(m.Key("attention.layer_norm_rms_epsilon"), s.eps);
  w.SetUint32(m.Key("ssm.conv_kernel"), static_cast<uint32_t>(s.d_conv));
  SetMamba2Keys(m, d_inner, s.d_state, s.n_head, s.n_group);
  AddEmbeddingAndHead(m, s.n_embd, s.n_vocab, /*tied_output=*/false);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    m.AddOnes(Blk(l, "attn_norm.weight"), {s.n_embd});
    m.AddWeight(Blk(l, "ssm_in.weight"), {s.n_embd, in_proj});
    AddMamba2Small(m, l, s.d_conv, conv_ch, s.n_head, d_inner, s.n_group);
    m.AddWeight(Blk(l, "ssm_out.weight"), {d_inner, s.n_embd});
  }
  return m;
}

SyntheticModel GraniteHybrid(const GraniteHybridShape& s) {
  SyntheticModel m("granitehybrid");
  SetDecoderKeys(m, s.n_ctx, s.n_embd, s.n_layer);
  const int64_t d_inner = s.inner(), head_dim = s.head_dim(), conv_ch = s.conv_channels(), in_proj = s.in_proj();
  std::vector<int32_t> kv_heads(s.n_layer);
  for (int32_t l = 0; l < s.n_layer; ++l) kv_heads[l] = s.attention(l) ? s.n_head_kv : 0;
  GgufWriter& w = m.metadata();
  w.SetUint32(m.Key("feed_forward_length"), static_cast<uint32_t>(s.n_ff));
  w.SetUint32(m.Key("attention.head_count"), static_cast<uint32_t>(s.n_head));
  w.SetFloat32(m.Key("attention.layer_norm_rms_epsilon"), s.eps);
  w.SetUint32(m.Key("ssm.conv_kernel"), static_cast<uint32_t>(s.d_conv));
  w.SetInt32Array(m.Key("attention.head_count_kv"), kv_heads);
  w.SetFloat32(m.Key("attention.scale"), 1.0f / static_cast<float>(head_dim));
  w.SetFloat32(m.Key("embedding_scale"), s.embedding_scale);
  w.SetFloat32(m.Key("residual_scale"), s.residual_scale);
  w.SetFloat32(m.Key("logit_scale"), s.logit_scale);
  w.SetBool(m.Key("rope.scaling.finetuned"), false);
  SetMamba2Keys(m, d_inner, s.d_state, s.ssm_heads, s.n_group);
  AddEmbeddingAndHead(m, s.n_embd, s.n_vocab, s.tied_output);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    m.AddOnes(Blk(l, "attn_norm.weight"), {s.n_embd});
    m.AddOnes(Blk(l, "ffn_norm.weight"), {s.n_embd});
    if (s.attention(l)) {
      AddAttention(m, l, s.n_embd, s.n_head * head_dim, s.n_head_kv * head_dim, s.n_head * head_dim);
    } else {
      m.AddWeight(Blk(l, "ssm_in.weight"), {s.n_embd, in_proj});
      m.AddWeight(Blk(l, "ssm_out.weight"), {d_inner, s.n_embd});
      AddMamba2Small(m, l, s.d_conv, conv_ch, s.ssm_heads, d_inner, s.n_group);
    }
    AddSwiGlu(m, l, s.n_embd, s.n_ff);
  }
  return m;
}

SyntheticModel Qwen35(const Qwen35Shape& s) {
  const bool moe = s.n_expert > 0;
  SyntheticModel m(moe ? "qwen35moe" : "qwen35");
  SetDecoderKeys(m, s.n_ctx, s.n_embd, s.n_layer);
  const int64_t E = s.n_embd, hd = s.head_dim, conv_ch = s.conv_channels(), value_dim = s.value_dim();
  SetAttentionKeys(m, moe ? 0 : s.n_ff, s.n_head, s.n_head_kv, s.eps);
  GgufWriter& w = m.metadata();
  w.SetUint32(m.Key("attention.key_length"), static_cast<uint32_t>(hd));
  w.SetUint32(m.Key("attention.value_length"), static_cast<uint32_t>(hd));
  w.SetUint32(m.Key("full_attention_interval"), static_cast<uint32_t>(s.full_attention_interval));
  w.SetUint32(m.Key("rope.dimension_count"), static_cast<uint32_t>(s.rope_dims));
  w.SetInt32Array(m.Key("rope.dimension_sections"),
                  {s.rope_sections[0], s.rope_sections[1], s.rope_sections[2], s.rope_sections[3]});
  w.SetFloat32(m.Key("rope.freq_base"), s.rope_base);
  w.SetUint32(m.Key("ssm.conv_kernel"), static_cast<uint32_t>(s.d_conv));
  w.SetUint32(m.Key("ssm.group_count"), static_cast<uint32_t>(s.ssm_k_heads));
  w.SetUint32(m.Key("ssm.time_step_rank"), static_cast<uint32_t>(s.ssm_v_heads));
  w.SetUint32(m.Key("ssm.state_size"), static_cast<uint32_t>(s.d_state));
  w.SetUint32(m.Key("ssm.inner_size"), static_cast<uint32_t>(value_dim));
  if (moe) {
    w.SetUint32(m.Key("expert_count"), static_cast<uint32_t>(s.n_expert));
    w.SetUint32(m.Key("expert_used_count"), static_cast<uint32_t>(s.n_expert_used));
    w.SetUint32(m.Key("expert_feed_forward_length"), static_cast<uint32_t>(s.n_ff_expert));
    w.SetUint32(m.Key("expert_shared_feed_forward_length"), static_cast<uint32_t>(s.n_ff_shared));
  }
  AddEmbeddingAndHead(m, E, s.n_vocab, s.tied_output);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    m.AddOnes(Blk(l, "attn_norm.weight"), {E});
    m.AddOnes(Blk(l, "post_attention_norm.weight"), {E});
    if (s.attention(l)) {
      // attn_q rows are [query | gate] per head.
      AddAttention(m, l, E, 2 * s.n_head * hd, s.n_head_kv * hd, s.n_head * hd);
      m.AddOnes(Blk(l, "attn_q_norm.weight"), {hd});
      m.AddOnes(Blk(l, "attn_k_norm.weight"), {hd});
    } else {
      m.AddWeight(Blk(l, "attn_qkv.weight"), {E, conv_ch});
      m.AddWeight(Blk(l, "attn_gate.weight"), {E, value_dim});
      m.Add(Blk(l, "ssm_conv1d.weight"), {s.d_conv, conv_ch}, Init::Symmetric(0.5f));
      m.Add(Blk(l, "ssm_dt.bias"), {s.ssm_v_heads}, Init::Symmetric(1.0f));
      m.Add(Blk(l, "ssm_a"), {s.ssm_v_heads}, Init::Uniform(-2.0f, -0.5f));
      m.AddWeight(Blk(l, "ssm_beta.weight"), {E, s.ssm_v_heads});
      m.AddWeight(Blk(l, "ssm_alpha.weight"), {E, s.ssm_v_heads});
      m.AddOnes(Blk(l, "ssm_norm.weight"), {s.d_state});
      m.AddWeight(Blk(l, "ssm_out.weight"), {value_dim, E});
    }
    if (!moe) {
      AddSwiGlu(m, l, E, s.n_ff);
      continue;
    }
    m.Add(Blk(l, "ffn_gate_inp.weight"), {E, s.n_expert}, Init::Symmetric(1.0f));
    m.AddWeight(Blk(l, "ffn_gate_exps.weight"), {E, s.n_ff_expert, s.n_expert});
    m.AddWeight(Blk(l, "ffn_up_exps.weight"), {E, s.n_ff_expert, s.n_expert});
    m.AddWeight(Blk(l, "ffn_down_exps.weight"), {s.n_ff_expert, E, s.n_expert});
    m.Add(Blk(l, "ffn_gate_inp_shexp.weight"), {E}, Init::Symmetric(0.5f));
    m.AddWeight(Blk(l, "ffn_gate_shexp.weight"), {E, s.n_ff_shared});
    m.AddWeight(Blk(l, "ffn_up_shexp.weight"), {E, s.n_ff_shared});
    m.AddWeight(Blk(l, "ffn_down_shexp.weight"), {s.n_ff_shared, E});
  }
  return m;
}

}  // namespace cairn::synthetic
