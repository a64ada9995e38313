#!/usr/bin/python3
"""Writes the dense bench models of ../shared/BENCHMARKS.md with random
weights, F32, for comparing cairn with llama.cpp on the same files (quantize
them with llama.cpp's `llama-quantize FILE OUT Q8_0|Q4_K_M|F16|...`; see the
README's Benchmarks section):

  bench-llama-F32.gguf   arch llama: n_embd 2048, 8 layers, 16 heads / 8 KV
                         heads of 128, ffn 5632, untied output, rope base
                         5e5 (509M parameters);
  bench-qwen35-F32.gguf  arch qwen35 with Qwen3.5-0.8B's shapes: n_embd
                         1024, 24 layers (every 4th gated attention, 8 heads
                         / 2 KV heads of 256, IMROPE 64 dims [11, 11, 10, 0],
                         base 1e7), Gated DeltaNet with 16 key and 16 value
                         heads of 128, conv 4, ffn 3584, tied output (531M).

Both with a vocabulary of 32000 and a minimal SPM tokenizer (so that
cairn-server serves them too). Matrices are normal with std 1/sqrt(fan-in).

  PYTHONPATH=$LLAMA/gguf-py /usr/bin/python3 make_bench_models.py OUT_DIR [llama|qwen35 ...]

(needs python3-numpy). Tensors are streamed (bench_gguf.write_model).
"""
import os
import sys

import numpy as np

import bench_gguf

VOCAB = 32000


class Llama:
    name = "bench-llama"
    arch = "llama"
    n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff = 2048, 8, 16, 8, 128, 5632

    def metadata(self, w):
        w.add_name(self.name)
        bench_gguf.add_minimal_spm_vocab(w, VOCAB)
        w.add_vocab_size(VOCAB)
        w.add_context_length(8192)
        w.add_block_count(self.n_layer)
        w.add_embedding_length(self.n_embd)
        w.add_feed_forward_length(self.n_ff)
        w.add_head_count(self.n_head)
        w.add_head_count_kv(self.n_head_kv)
        w.add_rope_dimension_count(self.head_dim)
        w.add_rope_freq_base(5e5)
        w.add_layer_norm_rms_eps(1e-5)

    def tensors(self):
        E, F = self.n_embd, self.n_ff
        yield "token_embd.weight", [E, VOCAB], "w"
        yield "output_norm.weight", [E], "norm"
        yield "output.weight", [E, VOCAB], "w"
        for il in range(self.n_layer):
            p = "blk.%d." % il
            yield p + "attn_norm.weight", [E], "norm"
            yield p + "attn_q.weight", [E, self.n_head * self.head_dim], "w"
            yield p + "attn_k.weight", [E, self.n_head_kv * self.head_dim], "w"
            yield p + "attn_v.weight", [E, self.n_head_kv * self.head_dim], "w"
            yield p + "attn_output.weight", [self.n_head * self.head_dim, E], "w"
            yield p + "ffn_norm.weight", [E], "norm"
            yield p + "ffn_gate.weight", [E, F], "w"
            yield p + "ffn_up.weight", [E, F], "w"
            yield p + "ffn_down.weight", [F, E], "w"


class Qwen35:
    name = "bench-qwen35"
    arch = "qwen35"
    n_ff = 3584
    shape = bench_gguf.Qwen35Shape(n_embd=1024, n_layer=24, interval=4, n_head=8, n_head_kv=2, head_dim=256,
                                   rope_dims=64, rope_base=1e7, dn_k_heads=16, dn_v_heads=16, dn_head_dim=128, conv=4)

    def metadata(self, w):
        w.add_name(self.name)
        bench_gguf.add_minimal_spm_vocab(w, VOCAB)
        w.add_vocab_size(VOCAB)
        self.shape.add_metadata(w)
        w.add_feed_forward_length(self.n_ff)

    def tensors(self):
        E, F = self.shape.n_embd, self.n_ff
        yield "token_embd.weight", [E, VOCAB], "w"  # tied: also the output
        yield "output_norm.weight", [E], "norm"
        for il in range(self.shape.n_layer):
            p = "blk.%d." % il
            yield from self.shape.mixer_tensors(il)
            yield p + "ffn_gate.weight", [E, F], "w"
            yield p + "ffn_up.weight", [E, F], "w"
            yield p + "ffn_down.weight", [F, E], "w"


MODELS = {"llama": Llama(), "qwen35": Qwen35()}


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: make_bench_models.py OUT_DIR [llama|qwen35 ...]")
    out = sys.argv[1]
    which = sys.argv[2:] or list(MODELS)
    for key in which:
        if key not in MODELS:
            sys.exit("make_bench_models.py: unknown model '%s' (llama, qwen35)" % key)
    for key in which:
        m = MODELS[key]
        path = os.path.join(out, m.name + "-F32.gguf")
        bench_gguf.write_model(path, m.arch, m.metadata, m.tensors(), 20261125, np.float32)
        print(path)


if __name__ == "__main__":
    main()
