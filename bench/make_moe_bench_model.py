#!/usr/bin/python3
"""Writes bench-qwen35moe-F16.gguf: a random-weight `qwen35moe` model with
Qwen3.5-35B-A3B's per-layer shapes and only 4 layers (3 Gated DeltaNet, 1
gated attention), so that it fits in this machine's memory, for comparing
cairn with llama.cpp on the same MoE file (quantize it with llama.cpp's
`llama-quantize FILE OUT Q8_0`; see the README's Benchmarks section).

  PYTHONPATH=$LLAMA/gguf-py /usr/bin/python3 make_moe_bench_model.py OUT_DIR

(needs python3-numpy). Per layer: n_embd 2048; a MoE FFN of 256 experts, 8
used, SwiGLU experts of width 512, a gated shared SwiGLU expert of width
512; DeltaNet layers with 16 key heads and 32 value heads of dim 128 (inner
4096), conv kernel 4; the attention layer (every 4th) with 16 heads / 2 KV
heads of dim 256, IMROPE over 64 dims, sections [11, 11, 10, 0], base 1e7.
Vocabulary 32000 with no tokenizer (`tokenizer.ggml.model` none), untied
output. Matrices are F16 (the source for llama-quantize), 1-D tensors,
the router and the convolution F32. Tensors are streamed to the file one at
a time (bench_gguf.write_model): the whole model (7 GB) is never in memory.
"""
import os
import sys

import numpy as np

import bench_gguf

ARCH = "qwen35moe"
VOCAB = 32000
N_EXPERT, N_USED, N_FF_EXP, N_FF_SHARED = 256, 8, 512, 512
SHAPE = bench_gguf.Qwen35Shape(n_embd=2048, n_layer=4, interval=4, n_head=16, n_head_kv=2, head_dim=256,
                               rope_dims=64, rope_base=1e7, dn_k_heads=16, dn_v_heads=32, dn_head_dim=128, conv=4)


def tensors():
    E = SHAPE.n_embd
    yield "token_embd.weight", [E, VOCAB], "w"
    yield "output_norm.weight", [E], "norm"
    yield "output.weight", [E, VOCAB], "w"
    for il in range(SHAPE.n_layer):
        p = "blk.%d." % il
        yield from SHAPE.mixer_tensors(il)
        yield p + "ffn_gate_inp.weight", [E, N_EXPERT], "router"
        yield p + "ffn_gate_exps.weight", [E, N_FF_EXP, N_EXPERT], "w"
        yield p + "ffn_up_exps.weight", [E, N_FF_EXP, N_EXPERT], "w"
        yield p + "ffn_down_exps.weight", [N_FF_EXP, E, N_EXPERT], "w"
        yield p + "ffn_gate_inp_shexp.weight", [E], "norm"
        yield p + "ffn_gate_shexp.weight", [E, N_FF_SHARED], "w"
        yield p + "ffn_up_shexp.weight", [E, N_FF_SHARED], "w"
        yield p + "ffn_down_shexp.weight", [N_FF_SHARED, E], "w"


def metadata(w):
    w.add_name("bench-qwen35moe")
    w.add_vocab_size(VOCAB)
    w.add_tokenizer_model("none")
    SHAPE.add_metadata(w)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(N_USED)
    w.add_expert_feed_forward_length(N_FF_EXP)
    w.add_expert_shared_feed_forward_length(N_FF_SHARED)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    path = os.path.join(out, "bench-qwen35moe-F16.gguf")
    bench_gguf.write_model(path, ARCH, metadata, tensors(), 20261125, np.float16)
    print(path)


if __name__ == "__main__":
    main()
