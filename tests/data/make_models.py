#!/usr/bin/python3
"""Writes the tiny random-weight GGUF reference models of tests/data with
llama.cpp's own gguf-py (real metadata keys and tensor names), for
architectures ../shared/golden has no model of.

  PYTHONPATH=$LLAMA/gguf-py python3 make_models.py OUT_DIR
(needs python3-numpy). The vocabulary is the golden models' 512-piece SPM
vocabulary, copied from ../shared/golden/models/llama.gguf.
"""
import os
import sys

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("CAIRN_SHARED_DIR", os.path.join(HERE, "..", "..", "..", "shared"))


def copy_tokenizer(writer, source):
    reader = gguf.GGUFReader(source)
    for field in reader.fields.values():
        if not field.name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == gguf.GGUFValueType.STRING:
                values = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
            else:
                values = [field.parts[i][0].item() for i in field.data]
            writer.add_array(field.name, values)
        elif vtype == gguf.GGUFValueType.STRING:
            writer.add_string(field.name, bytes(field.parts[field.data[0]]).decode("utf-8"))
        else:
            value = field.parts[field.data[0]][0].item()
            {gguf.GGUFValueType.UINT32: writer.add_uint32, gguf.GGUFValueType.INT32: writer.add_int32,
             gguf.GGUFValueType.BOOL: writer.add_bool, gguf.GGUFValueType.FLOAT32: writer.add_float32}[vtype](
                field.name, value)


def qwen3moe(path, rng):
    """qwen3moe: qwen3's attention (q/k RMS norms, NEOX RoPE) with a MoE FFN
    in every layer: 4 experts, 2 used, softmax router, weights renormalised,
    SwiGLU experts of width 32, no shared expert."""
    n_embd, n_layer, n_head, n_kv, hd, n_exp, n_used, n_ff, vocab = 64, 4, 4, 2, 16, 4, 2, 32, 512
    w = gguf.GGUFWriter(path, "qwen3moe")
    w.add_block_count(n_layer)
    w.add_context_length(4096)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(n_ff * n_used)
    w.add_expert_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(1e6)
    w.add_expert_count(n_exp)
    w.add_expert_used_count(n_used)
    copy_tokenizer(w, os.path.join(SHARED, "golden", "models", "llama.gguf"))

    def t(name, *shape, scale=0.1):  # shape in ggml order [ne0, ne1, ...]
        w.add_tensor(name, (rng.standard_normal(tuple(reversed(shape))) * scale).astype(np.float32))

    def norm(name, n):
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    t("token_embd.weight", n_embd, vocab, scale=0.5)
    norm("output_norm.weight", n_embd)
    t("output.weight", n_embd, vocab)
    for il in range(n_layer):
        p = "blk.%d." % il
        norm(p + "attn_norm.weight", n_embd)
        t(p + "attn_q.weight", n_embd, n_head * hd)
        t(p + "attn_k.weight", n_embd, n_kv * hd)
        t(p + "attn_v.weight", n_embd, n_kv * hd)
        t(p + "attn_output.weight", n_head * hd, n_embd)
        norm(p + "attn_q_norm.weight", hd)
        norm(p + "attn_k_norm.weight", hd)
        norm(p + "ffn_norm.weight", n_embd)
        t(p + "ffn_gate_inp.weight", n_embd, n_exp, scale=0.5)
        t(p + "ffn_gate_exps.weight", n_embd, n_ff, n_exp)
        t(p + "ffn_up_exps.weight", n_embd, n_ff, n_exp)
        t(p + "ffn_down_exps.weight", n_ff, n_embd, n_exp)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tensor_adders(w, rng):
    """t(name, *ggml_shape, scale): a random matrix; norm(name, n): a norm
    weight around 1."""
    def t(name, *shape, scale=0.1):
        w.add_tensor(name, (rng.standard_normal(tuple(reversed(shape))) * scale).astype(np.float32))

    def norm(name, n):
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32))
    return t, norm


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def decoder_writer(path, arch, n_embd, heads, kv_heads, n_ff):
    """A writer of `arch` with the decoder keys these models share: the
    per-layer head counts (arrays) and FFN width(s), context 4096, RMS eps
    1e-5."""
    w = gguf.GGUFWriter(path, arch)
    w.add_block_count(len(heads))
    w.add_context_length(4096)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(1e-5)
    return w


def deci_kv(path, rng):
    """deci: the llama wiring whose layers declare their own head counts and
    FFN widths: query heads 4, 4, 8, 4 and K/V heads 2, 1, 4, 2 of head dim
    8, SwiGLU widths 48, 32, 48, 16; NORMAL RoPE; tied output."""
    n_embd, hd, vocab = 32, 8, 512
    heads, kv_heads, n_ff = [4, 4, 8, 4], [2, 1, 4, 2], [48, 32, 48, 16]
    w = decoder_writer(path, "deci", n_embd, heads, kv_heads, n_ff)
    w.add_rope_freq_base(10000.0)
    copy_tokenizer(w, os.path.join(SHARED, "golden", "models", "llama.gguf"))
    t, norm = tensor_adders(w, rng)
    t("token_embd.weight", n_embd, vocab, scale=0.5)
    norm("output_norm.weight", n_embd)
    for il in range(len(heads)):
        p = "blk.%d." % il
        norm(p + "attn_norm.weight", n_embd)
        t(p + "attn_q.weight", n_embd, heads[il] * hd)
        t(p + "attn_k.weight", n_embd, kv_heads[il] * hd)
        t(p + "attn_v.weight", n_embd, kv_heads[il] * hd)
        t(p + "attn_output.weight", heads[il] * hd, n_embd)
        norm(p + "ffn_norm.weight", n_embd)
        t(p + "ffn_gate.weight", n_embd, n_ff[il])
        t(p + "ffn_up.weight", n_embd, n_ff[il])
        t(p + "ffn_down.weight", n_ff[il], n_embd)
    finish(w)


def granitehybrid_kv(path, rng):
    """granitehybrid: Mamba-2 layers (head_count_kv 0) and attention layers
    of different head counts: layers M, A, M, A, A with query heads 4, 8, 4
    and K/V heads 1, 4, 2 of head dim 8 in the attention layers; no RoPE;
    SwiGLU FFNs of width 32; Granite's embedding, residual, attention and
    logit scales; tied output."""
    n_embd, hd, vocab, n_ff = 32, 8, 512, 32
    d_inner, d_state, n_ssm_head, n_group, d_conv = 64, 8, 4, 1, 4
    heads, kv_heads = [4, 4, 4, 8, 4], [0, 1, 0, 4, 2]
    w = decoder_writer(path, "granitehybrid", n_embd, heads, kv_heads, n_ff)
    w.add_ssm_conv_kernel(d_conv)
    w.add_ssm_inner_size(d_inner)
    w.add_ssm_state_size(d_state)
    w.add_ssm_time_step_rank(n_ssm_head)
    w.add_ssm_group_count(n_group)
    w.add_bool("granitehybrid.rope.scaling.finetuned", False)
    w.add_rope_dimension_count(hd)
    w.add_embedding_scale(12.0)
    w.add_residual_scale(0.22)
    w.add_attention_scale(0.125)
    w.add_logit_scale(8.0)
    copy_tokenizer(w, os.path.join(SHARED, "golden", "models", "llama.gguf"))
    t, norm = tensor_adders(w, rng)
    t("token_embd.weight", n_embd, vocab, scale=0.5)
    norm("output_norm.weight", n_embd)
    conv_channels = d_inner + 2 * n_group * d_state
    for il in range(len(heads)):
        p = "blk.%d." % il
        norm(p + "attn_norm.weight", n_embd)
        if kv_heads[il] == 0:
            t(p + "ssm_in.weight", n_embd, 2 * d_inner + 2 * n_group * d_state + n_ssm_head)
            t(p + "ssm_conv1d.weight", d_conv, conv_channels, scale=0.5)
            t(p + "ssm_conv1d.bias", conv_channels)
            t(p + "ssm_dt.bias", n_ssm_head)
            w.add_tensor(p + "ssm_a", -rng.uniform(0.5, 4.0, (n_ssm_head, 1)).astype(np.float32))
            t(p + "ssm_d", 1, n_ssm_head, scale=1.0)
            norm(p + "ssm_norm.weight", d_inner)
            t(p + "ssm_out.weight", d_inner, n_embd)
        else:
            t(p + "attn_q.weight", n_embd, heads[il] * hd)
            t(p + "attn_k.weight", n_embd, kv_heads[il] * hd)
            t(p + "attn_v.weight", n_embd, kv_heads[il] * hd)
            t(p + "attn_output.weight", heads[il] * hd, n_embd)
        norm(p + "ffn_norm.weight", n_embd)
        t(p + "ffn_gate.weight", n_embd, n_ff)
        t(p + "ffn_up.weight", n_embd, n_ff)
        t(p + "ffn_down.weight", n_ff, n_embd)
    finish(w)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else HERE
    qwen3moe(os.path.join(out, "qwen3moe.gguf"), np.random.default_rng(20261125))
    deci_kv(os.path.join(out, "deci-kv.gguf"), np.random.default_rng(20261128))
    granitehybrid_kv(os.path.join(out, "granitehybrid-kv.gguf"), np.random.default_rng(20261129))


if __name__ == "__main__":
    main()
