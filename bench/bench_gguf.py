"""Shared by the bench model writers (make_bench_models.py,
make_moe_bench_model.py): random weights at a realistic scale, a minimal
SPM vocabulary, and a GGUF writer that streams one tensor at a time so that
a multi-GiB model is never whole in memory. Needs llama.cpp's gguf-py on
PYTHONPATH and numpy.

A tensor spec is (name, ggml shape [ne0, ne1, ...], kind); kind is
  'w'       a weight matrix, written in the writer's matrix type;
  'router' / 'conv'  an F32 matrix (kept F32 as llama.cpp's converters do);
  'norm'    a 1-D norm weight (around 1);
  'a'       Gated DeltaNet's decay rates (-exp(A_log): negative);
  'dt'      Gated DeltaNet's time-step bias.
"""
import sys

import numpy as np
import gguf

# SPM token types (llama.cpp's llama_token_type).
_NORMAL, _UNKNOWN, _CONTROL, _BYTE = 1, 2, 3, 6


def values(rng, shape, kind, matrix_dtype):
    numpy_shape = tuple(reversed(shape))
    n = int(np.prod(numpy_shape))
    if kind == "norm":
        return (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).reshape(numpy_shape)
    if kind == "a":
        return -rng.uniform(0.5, 4.0, n).astype(np.float32)
    if kind == "dt":
        return (0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)
    # Matrices: std 1/sqrt(fan-in) keeps the activations in range.
    scale = np.float32(1.0 / np.sqrt(shape[0]))
    data = rng.standard_normal(n, dtype=np.float32)
    data *= scale
    data = data.reshape(numpy_shape)
    return data.astype(matrix_dtype) if kind == "w" else data


def add_minimal_spm_vocab(w, n_vocab):
    """A valid 'llama' (SPM) vocabulary of n_vocab tokens that llama.cpp and
    cairn both load: <unk>, <s>, </s>, the 256 byte tokens, then distinct
    filler pieces. Benchmarks feed token ids; the text it makes is
    meaningless."""
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [_UNKNOWN, _CONTROL, _CONTROL] + [_BYTE] * 256
    first_piece = len(tokens)
    tokens += ["\u2581p%d" % i for i in range(n_vocab - first_piece)]
    types += [_NORMAL] * (n_vocab - first_piece)
    scores = [0.0] * first_piece + [-float(i) for i in range(n_vocab - first_piece)]
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)


def write_model(path, arch, metadata, specs, seed, matrix_dtype):
    """Writes the GGUF at path: metadata(writer) sets the key/values, specs
    lists the tensors in file order, drawn from one generator seeded with
    seed; 'w' matrices are matrix_dtype (np.float32 or np.float16)."""
    w = gguf.GGUFWriter(path, arch)
    metadata(w)
    specs = list(specs)
    for name, shape, kind in specs:
        dtype = np.dtype(matrix_dtype if kind == "w" else np.float32)
        n = int(np.prod(shape))
        w.add_tensor_info(name, list(reversed(shape)), dtype, n * dtype.itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    for name, shape, kind in specs:
        w.write_tensor_data(values(rng, shape, kind, matrix_dtype))
        print(name, shape, file=sys.stderr)
    w.close()


class Qwen35Shape:
    """The shapes shared by qwen35 and qwen35moe: every `interval`-th layer
    is gated attention (n_head query heads with a gate each, n_head_kv KV
    heads of head_dim, IMROPE over rope_dims with sections [11, 11, 10, 0]),
    the others Gated DeltaNet (dn_k_heads key heads, dn_v_heads value heads
    of dn_head_dim, causal conv of kernel conv)."""

    def __init__(self, n_embd, n_layer, interval, n_head, n_head_kv, head_dim, rope_dims, rope_base,
                 dn_k_heads, dn_v_heads, dn_head_dim, conv):
        self.n_embd, self.n_layer, self.interval = n_embd, n_layer, interval
        self.n_head, self.n_head_kv, self.head_dim = n_head, n_head_kv, head_dim
        self.rope_dims, self.rope_base = rope_dims, rope_base
        self.dn_k_heads, self.dn_v_heads, self.dn_head_dim, self.conv = dn_k_heads, dn_v_heads, dn_head_dim, conv
        self.dn_inner = dn_v_heads * dn_head_dim
        self.dn_conv_channels = 2 * dn_k_heads * dn_head_dim + self.dn_inner

    def is_attention(self, il):
        return (il + 1) % self.interval == 0

    def add_metadata(self, w):
        w.add_context_length(65536)
        w.add_block_count(self.n_layer)
        w.add_embedding_length(self.n_embd)
        w.add_head_count(self.n_head)
        w.add_head_count_kv(self.n_head_kv)
        w.add_key_length(self.head_dim)
        w.add_value_length(self.head_dim)
        w.add_layer_norm_rms_eps(1e-6)
        w.add_rope_dimension_count(self.rope_dims)
        w.add_rope_dimension_sections([11, 11, 10, 0])
        w.add_rope_freq_base(self.rope_base)
        w.add_full_attention_interval(self.interval)
        w.add_ssm_conv_kernel(self.conv)
        w.add_ssm_state_size(self.dn_head_dim)
        w.add_ssm_group_count(self.dn_k_heads)
        w.add_ssm_time_step_rank(self.dn_v_heads)
        w.add_ssm_inner_size(self.dn_inner)

    def mixer_tensors(self, il):
        """Layer il's norms and its attention or DeltaNet tensors (the FFN is
        the caller's: dense or MoE)."""
        p = "blk.%d." % il
        E = self.n_embd
        yield p + "attn_norm.weight", [E], "norm"
        yield p + "post_attention_norm.weight", [E], "norm"
        if not self.is_attention(il):
            yield p + "attn_qkv.weight", [E, self.dn_conv_channels], "w"
            yield p + "attn_gate.weight", [E, self.dn_inner], "w"
            yield p + "ssm_conv1d.weight", [self.conv, self.dn_conv_channels], "conv"
            yield p + "ssm_dt.bias", [self.dn_v_heads], "dt"
            yield p + "ssm_a", [self.dn_v_heads], "a"
            yield p + "ssm_beta.weight", [E, self.dn_v_heads], "w"
            yield p + "ssm_alpha.weight", [E, self.dn_v_heads], "w"
            yield p + "ssm_norm.weight", [self.dn_head_dim], "norm"
            yield p + "ssm_out.weight", [self.dn_inner, E], "w"
        else:
            yield p + "attn_q.weight", [E, 2 * self.n_head * self.head_dim], "w"  # [query | gate] per head
            yield p + "attn_k.weight", [E, self.n_head_kv * self.head_dim], "w"
            yield p + "attn_v.weight", [E, self.n_head_kv * self.head_dim], "w"
            yield p + "attn_output.weight", [self.n_head * self.head_dim, E], "w"
            yield p + "attn_q_norm.weight", [self.head_dim], "norm"
            yield p + "attn_k_norm.weight", [self.head_dim], "norm"
