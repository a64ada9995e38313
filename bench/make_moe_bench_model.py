#!/usr/bin/python3
"""Writes bench-qwen35moe-F16.gguf: a random-weight `qwen35moe` model with
Qwen3.5-35B-A3B's per-layer shapes and only 4 layers (3 Gated DeltaNet, 1
gated attention), so that it fits in this machine's memory, for comparing
cairn with llama.cpp on the same MoE file (quantize it with llama.cpp's
`llama-quantize FILE OUT Q8_0`; see bench/README.md).

  PYTHONPATH=$LLAMA/gguf-py /usr/bin/python3 make_moe_bench_model.py OUT_DIR

(needs python3-numpy). Per layer: n_embd 2048; a MoE FFN of 256 experts, 8
used, SwiGLU experts of width 512, a gated shared SwiGLU expert of width
512; DeltaNet layers with 16 key heads and 32 value heads of dim 128 (inner
4096), conv kernel 4; the attention layer (every 4th) with 16 heads / 2 KV
heads of dim 256, IMROPE over 64 dims, sections [11, 11, 10, 0], base 1e7.
Vocabulary 32000 with no tokenizer (`tokenizer.ggml.model` none), untied
output. Matrices are F16 (the source for llama-quantize), 1-D tensors,
the router and the convolution F32. Tensors are streamed to the file one at
a time: the whole model (7 GB) is never in memory.
"""
import os
import sys

import numpy as np
import gguf

ARCH = "qwen35moe"
N_EMBD, N_LAYER, INTERVAL, VOCAB = 2048, 4, 4, 32000
N_EXPERT, N_USED, N_FF_EXP, N_FF_SHARED = 256, 8, 512, 512
N_HEAD, N_HEAD_KV, HEAD_DIM, ROPE_DIMS = 16, 2, 256, 64
DN_K_HEADS, DN_V_HEADS, DN_HEAD_DIM, CONV = 16, 32, 128, 4
DN_INNER = DN_V_HEADS * DN_HEAD_DIM
DN_CONV_CHANNELS = 2 * DN_K_HEADS * DN_HEAD_DIM + DN_INNER


def tensors():
    """(name, ggml shape [ne0, ne1, ...], kind) in file order; kind is
    'w' (F16 matrix), 'router' / 'conv' (F32 matrix), 'norm', 'a', 'dt'."""
    yield "token_embd.weight", [N_EMBD, VOCAB], "w"
    yield "output_norm.weight", [N_EMBD], "norm"
    yield "output.weight", [N_EMBD, VOCAB], "w"
    for il in range(N_LAYER):
        p = "blk.%d." % il
        yield p + "attn_norm.weight", [N_EMBD], "norm"
        yield p + "post_attention_norm.weight", [N_EMBD], "norm"
        if (il + 1) % INTERVAL != 0:
            yield p + "attn_qkv.weight", [N_EMBD, DN_CONV_CHANNELS], "w"
            yield p + "attn_gate.weight", [N_EMBD, DN_INNER], "w"
            yield p + "ssm_conv1d.weight", [CONV, DN_CONV_CHANNELS], "conv"
            yield p + "ssm_dt.bias", [DN_V_HEADS], "dt"
            yield p + "ssm_a", [DN_V_HEADS], "a"
            yield p + "ssm_beta.weight", [N_EMBD, DN_V_HEADS], "w"
            yield p + "ssm_alpha.weight", [N_EMBD, DN_V_HEADS], "w"
            yield p + "ssm_norm.weight", [DN_HEAD_DIM], "norm"
            yield p + "ssm_out.weight", [DN_INNER, N_EMBD], "w"
        else:
            yield p + "attn_q.weight", [N_EMBD, 2 * N_HEAD * HEAD_DIM], "w"  # [query | gate] per head
            yield p + "attn_k.weight", [N_EMBD, N_HEAD_KV * HEAD_DIM], "w"
            yield p + "attn_v.weight", [N_EMBD, N_HEAD_KV * HEAD_DIM], "w"
            yield p + "attn_output.weight", [N_HEAD * HEAD_DIM, N_EMBD], "w"
            yield p + "attn_q_norm.weight", [HEAD_DIM], "norm"
            yield p + "attn_k_norm.weight", [HEAD_DIM], "norm"
        yield p + "ffn_gate_inp.weight", [N_EMBD, N_EXPERT], "router"
        yield p + "ffn_gate_exps.weight", [N_EMBD, N_FF_EXP, N_EXPERT], "w"
        yield p + "ffn_up_exps.weight", [N_EMBD, N_FF_EXP, N_EXPERT], "w"
        yield p + "ffn_down_exps.weight", [N_FF_EXP, N_EMBD, N_EXPERT], "w"
        yield p + "ffn_gate_inp_shexp.weight", [N_EMBD], "norm"
        yield p + "ffn_gate_shexp.weight", [N_EMBD, N_FF_SHARED], "w"
        yield p + "ffn_up_shexp.weight", [N_EMBD, N_FF_SHARED], "w"
        yield p + "ffn_down_shexp.weight", [N_FF_SHARED, N_EMBD], "w"


def values(rng, shape, kind):
    numpy_shape = tuple(reversed(shape))
    n = int(np.prod(numpy_shape))
    if kind == "norm":
        return (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).reshape(numpy_shape)
    if kind == "a":  # -exp(A_log): decay rates
        return -rng.uniform(0.5, 4.0, n).astype(np.float32)
    if kind == "dt":
        return (0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)
    # Matrices: std 1/sqrt(fan-in) keeps the activations in range.
    scale = np.float32(1.0 / np.sqrt(shape[0]))
    data = rng.standard_normal(n, dtype=np.float32)
    data *= scale
    data = data.reshape(numpy_shape)
    return data.astype(np.float16) if kind == "w" else data


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    path = os.path.join(out, "bench-qwen35moe-F16.gguf")
    rng = np.random.default_rng(20261125)
    w = gguf.GGUFWriter(path, ARCH)
    w.add_name("bench-qwen35moe")
    w.add_vocab_size(VOCAB)
    w.add_tokenizer_model("none")
    w.add_context_length(65536)
    w.add_block_count(N_LAYER)
    w.add_embedding_length(N_EMBD)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(N_USED)
    w.add_expert_feed_forward_length(N_FF_EXP)
    w.add_expert_shared_feed_forward_length(N_FF_SHARED)
    w.add_rope_dimension_count(ROPE_DIMS)
    w.add_rope_dimension_sections([11, 11, 10, 0])
    w.add_rope_freq_base(1e7)
    w.add_full_attention_interval(INTERVAL)
    w.add_ssm_conv_kernel(CONV)
    w.add_ssm_state_size(DN_HEAD_DIM)
    w.add_ssm_group_count(DN_K_HEADS)
    w.add_ssm_time_step_rank(DN_V_HEADS)
    w.add_ssm_inner_size(DN_INNER)
    specs = list(tensors())
    for name, shape, kind in specs:
        dtype = np.float16 if kind == "w" else np.float32
        n = int(np.prod(shape))
        w.add_tensor_info(name, list(reversed(shape)), np.dtype(dtype), n * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape, kind in specs:
        w.write_tensor_data(values(rng, shape, kind))
        print(name, shape, file=sys.stderr)
    w.close()
    print(path)


if __name__ == "__main__":
    main()
