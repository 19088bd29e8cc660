#!/usr/bin/env python3
"""Random-weight GGUF models with the shapes and vocabularies people run, for
bench/cpu_table.sh and bench/serve_bench.sh beside llama.cpp.

usage: bench/make_shapes.py OUT_DIR [SHAPE ...]      (default: every shape)

Each SHAPE is written as OUT_DIR/SHAPE-f16.gguf: F16 matrices (norms and
biases F32), the hyperparameters of the model it is named after, and a
synthetic tokenizer of that model's kind and exact vocabulary size (a
byte-level BPE whose merges build each token from two earlier ones, or a
SentencePiece vocabulary of scored pieces over byte fallback), which both
loom and llama.cpp load and tokenize with. Weights are N(0, 1/fan_in) for
matrices, 1 for norms, N(0, 0.1^2) for biases, N(0, 0.02^2) for the
embedding, from numpy's PCG64 seeded by (seed, the tensor's name), so a
file is a function of its shape and seed. Tensors stream to the file one at
a time; the largest shape needs ~6.2 GB of disk, not of memory.

bench/make_shapes.sh quantizes them with `loom quantize` to q8_0 and q4_k_m.

Shapes (from each model's config.json):
  smollm2-360m  llama, 49,152 tokens (BPE), 960 wide, 32 layers, 15/5 heads of 64, tied
  qwen2.5-0.5b  qwen2, 151,936 tokens (BPE), 896 wide, 24 layers, 14/2 heads of 64, QKV biases, tied
  llama3.2-1b   llama, 128,256 tokens (BPE), 2048 wide, 16 layers, 32/8 heads of 64, tied
  gemma2-2b     gemma (today's contract: Gemma 1's block), 256,000 tokens (SPM), 2304 wide,
                26 layers, 8/4 heads of 256, tied
  qwen2.5-3b    qwen2, 151,936 tokens (BPE), 2048 wide, 36 layers, 16/2 heads of 128, QKV biases, tied
Sliding windows:
  gemma3-1b     gemma3, 262,144 tokens (SPM), 1152 wide, 26 layers, 4/1 heads of 256, per-head QK-norm,
                post-norms, a window of 512 on five layers of six, tied; a 32,768-token context
Mixtures of experts, as llama files with experts (Mixtral's form, which
llama.cpp reads; experts renormalised):
  moe-a3b       Qwen3-30B-A3B's layout scaled to this machine: 32,000 tokens (SPM), 1024 wide, 16 layers,
                16/4 heads of 64, 64 experts of 384, 8 a token (the real one: 2048 wide, 48 layers, 128 of 768)
  mixtral-mini  Mixtral-8x7B's proportions scaled: 32,000 tokens (SPM), 1024 wide, 8 layers, 16/4 heads of 64,
                8 experts of 3584, 2 a token (the real one: 4096 wide, 32 layers, 8 of 14336)
"""
import os
import struct
import sys
import zlib

import numpy as np

SHAPES = {
    "smollm2-360m": dict(arch="llama", vocab="bpe", pre="smollm", n_vocab=49152, n_embd=960, n_layer=32,
                         n_head=15, n_head_kv=5, head_dim=64, n_ff=2560, rope_base=100000.0, eps=1e-5),
    "qwen2.5-0.5b": dict(arch="qwen2", vocab="bpe", pre="qwen2", n_vocab=151936, n_embd=896, n_layer=24,
                         n_head=14, n_head_kv=2, head_dim=64, n_ff=4864, rope_base=1000000.0, eps=1e-6,
                         qkv_bias=True),
    "llama3.2-1b": dict(arch="llama", vocab="bpe", pre="llama-bpe", n_vocab=128256, n_embd=2048, n_layer=16,
                        n_head=32, n_head_kv=8, head_dim=64, n_ff=8192, rope_base=500000.0, eps=1e-5),
    "gemma2-2b": dict(arch="gemma", vocab="spm", n_vocab=256000, n_embd=2304, n_layer=26, n_head=8,
                      n_head_kv=4, head_dim=256, n_ff=9216, rope_base=10000.0, eps=1e-6),
    "qwen2.5-3b": dict(arch="qwen2", vocab="bpe", pre="qwen2", n_vocab=151936, n_embd=2048, n_layer=36,
                       n_head=16, n_head_kv=2, head_dim=128, n_ff=11008, rope_base=1000000.0, eps=1e-6,
                       qkv_bias=True),
    "gemma3-1b": dict(arch="gemma3", vocab="spm", n_vocab=262144, n_embd=1152, n_layer=26, n_head=4,
                      n_head_kv=1, head_dim=256, n_ff=6912, rope_base=1000000.0, eps=1e-6, qk_norm=True,
                      post_norms=True, sliding_window=512, n_ctx=32768),
    "moe-a3b": dict(arch="llama", vocab="spm", n_vocab=32000, n_embd=1024, n_layer=16, n_head=16,
                    n_head_kv=4, head_dim=64, n_ff=384, rope_base=1000000.0, eps=1e-6, n_expert=64,
                    n_expert_used=8),
    "mixtral-mini": dict(arch="llama", vocab="spm", n_vocab=32000, n_embd=1024, n_layer=8, n_head=16,
                         n_head_kv=4, head_dim=64, n_ff=3584, rope_base=1000000.0, eps=1e-5, n_expert=8,
                         n_expert_used=2),
}
N_CTX = 8192
SEED = 1234

# GGUF value and tensor types
T_UINT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, T_INT32 = 4, 6, 7, 8, 9, 5
F32, F16 = 0, 1
ALIGN = 32

TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_BYTE = 1, 2, 3, 6


def gpt2_byte_chars():
    """GPT-2's printable stand-in for each byte."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + n)
            n += 1
    return [chars[b] for b in range(256)]


def bpe_vocab(n):
    """n tokens: the 256 bytes, then merges in rank order, each joining two
    earlier tokens of letters (and the space) into one not yet seen, short
    ones more often, as real merges do; then <|endoftext|>."""
    rng = np.random.default_rng(SEED)
    chars = gpt2_byte_chars()
    tokens = list(chars)
    seen = set(tokens)
    merges = []
    letters = [chars[b] for b in list(range(ord("a"), ord("z") + 1)) + list(range(ord("A"), ord("Z") + 1))]
    pool = letters + [chars[ord(" ")]] * 8  # what merges build from: words, with the space before them
    while len(tokens) < n - 1:
        a = pool[int(len(pool) * rng.random() ** 3)]
        b = letters[int(rng.integers(26))] if rng.random() < 0.7 else pool[int(len(pool) * rng.random() ** 4)]
        t = a + b
        if t in seen or len(t) > 16:
            continue
        seen.add(t)
        tokens.append(t)
        pool.append(t)
        merges.append(a + " " + b)
    tokens.append("<|endoftext|>")
    types = [TT_NORMAL] * (n - 1) + [TT_CONTROL]
    return dict(model="gpt2", tokens=tokens, types=types, merges=merges, bos=n - 1, eos=n - 1, add_bos=False)


def spm_vocab(n):
    """n tokens: <unk> <s> </s>, the 256 byte pieces, then pieces of letters
    with and without a leading U+2581, scored by rank."""
    rng = np.random.default_rng(SEED)
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [TT_UNKNOWN, TT_CONTROL, TT_CONTROL] + [TT_BYTE] * 256
    seen = set(tokens)
    alphabet = list("etaoinshrdlcumwfgypbvkjxqz")
    singles = ["\u2581"] + alphabet
    for s in singles:
        seen.add(s)
        tokens.append(s)
        types.append(TT_NORMAL)
    while len(tokens) < n:
        k = 1 + int(rng.integers(1, 9))
        t = ("\u2581" if rng.random() < 0.6 else "") + "".join(alphabet[int(26 * rng.random() ** 2)] for _ in range(k))
        if t in seen:
            continue
        seen.add(t)
        tokens.append(t)
        types.append(TT_NORMAL)
    scores = [0.0, 0.0, 0.0] + [0.0] * 256 + [-float(i) for i in range(n - 259)]
    return dict(model="llama", tokens=tokens, types=types, scores=scores, bos=1, eos=2, unk=0, add_bos=True)


def tensors(p):
    """(name, numpy shape, kind) in file order; kind: matrix (or every
    expert's, 3-D), norm, bias, embd, router."""
    E, D, L, V, F = p["n_embd"], p["head_dim"], p["n_layer"], p["n_vocab"], p["n_ff"]
    q, kv = p["n_head"] * D, p["n_head_kv"] * D
    out = [("token_embd.weight", (V, E), "embd"), ("output_norm.weight", (E,), "norm")]
    for i in range(L):
        b = "blk.%d." % i
        out += [(b + "attn_norm.weight", (E,), "norm"),
                (b + "attn_q.weight", (q, E), "matrix"), (b + "attn_k.weight", (kv, E), "matrix"),
                (b + "attn_v.weight", (kv, E), "matrix")]
        if p.get("qkv_bias"):
            out += [(b + "attn_q.bias", (q,), "bias"), (b + "attn_k.bias", (kv,), "bias"),
                    (b + "attn_v.bias", (kv,), "bias")]
        if p.get("qk_norm"):
            out += [(b + "attn_q_norm.weight", (D,), "norm"), (b + "attn_k_norm.weight", (D,), "norm")]
        out += [(b + "attn_output.weight", (E, q), "matrix"), (b + "ffn_norm.weight", (E,), "norm")]
        if p.get("post_norms"):
            out += [(b + "post_attention_norm.weight", (E,), "norm"), (b + "post_ffw_norm.weight", (E,), "norm")]
        X = p.get("n_expert", 0)
        if X:
            out += [(b + "ffn_gate_inp.weight", (X, E), "router"), (b + "ffn_gate_exps.weight", (X, F, E), "matrix"),
                    (b + "ffn_up_exps.weight", (X, F, E), "matrix"), (b + "ffn_down_exps.weight", (X, E, F), "matrix")]
        else:
            out += [(b + "ffn_gate.weight", (F, E), "matrix"), (b + "ffn_up.weight", (F, E), "matrix"),
                    (b + "ffn_down.weight", (E, F), "matrix")]
    return out


def values(name, shape, kind):
    if kind == "norm":
        return np.ones(shape, dtype=np.float32)
    rng = np.random.default_rng(np.random.SeedSequence([SEED, zlib.crc32(name.encode())]))
    std = {"bias": 0.1, "embd": 0.02}.get(kind, 1.0 / np.sqrt(shape[-1]))
    x = rng.standard_normal(shape, dtype=np.float32)
    x *= np.float32(std)
    return x if kind in ("bias", "router") else x.astype(np.float16)


def pack_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def pack_kv(key, vtype, value, elem=None):
    out = pack_str(key) + struct.pack("<I", vtype)
    if vtype == T_ARRAY:
        out += struct.pack("<IQ", elem, len(value))
        if elem == T_STRING:
            out += b"".join(pack_str(v) for v in value)
        else:
            fmt = {T_INT32: "i", T_FLOAT32: "f"}[elem]
            out += struct.pack("<%d%s" % (len(value), fmt), *value)
        return out
    if vtype == T_STRING:
        return out + pack_str(value)
    return out + struct.pack({T_UINT32: "<I", T_FLOAT32: "<f", T_BOOL: "<?"}[vtype], value)


def metadata(name, p, v):
    a = p["arch"]
    kv = [("general.architecture", T_STRING, a), ("general.name", T_STRING, "loom-bench-" + name),
          ("general.file_type", T_UINT32, 1),
          (a + ".context_length", T_UINT32, p.get("n_ctx", N_CTX)), (a + ".embedding_length", T_UINT32, p["n_embd"]),
          (a + ".block_count", T_UINT32, p["n_layer"]), (a + ".feed_forward_length", T_UINT32, p["n_ff"]),
          (a + ".attention.head_count", T_UINT32, p["n_head"]),
          (a + ".attention.head_count_kv", T_UINT32, p["n_head_kv"]),
          (a + ".attention.key_length", T_UINT32, p["head_dim"]),
          (a + ".attention.value_length", T_UINT32, p["head_dim"]),
          (a + ".rope.freq_base", T_FLOAT32, p["rope_base"]),
          (a + ".attention.layer_norm_rms_epsilon", T_FLOAT32, p["eps"])]
    if a == "llama":
        kv += [(a + ".rope.dimension_count", T_UINT32, p["head_dim"]), (a + ".vocab_size", T_UINT32, p["n_vocab"])]
    if p.get("sliding_window"):
        kv += [(a + ".attention.sliding_window", T_UINT32, p["sliding_window"])]
    if p.get("n_expert"):
        kv += [(a + ".expert_count", T_UINT32, p["n_expert"]), (a + ".expert_used_count", T_UINT32, p["n_expert_used"])]
    kv += [("tokenizer.ggml.model", T_STRING, v["model"]), ("tokenizer.ggml.pre", T_STRING, p.get("pre", "default")),
           ("tokenizer.ggml.tokens", T_ARRAY, v["tokens"], T_STRING),
           ("tokenizer.ggml.token_type", T_ARRAY, v["types"], T_INT32)]
    if "scores" in v:
        kv.append(("tokenizer.ggml.scores", T_ARRAY, v["scores"], T_FLOAT32))
    if "merges" in v:
        kv.append(("tokenizer.ggml.merges", T_ARRAY, v["merges"], T_STRING))
    kv += [("tokenizer.ggml.bos_token_id", T_UINT32, v["bos"]), ("tokenizer.ggml.eos_token_id", T_UINT32, v["eos"])]
    if "unk" in v:
        kv.append(("tokenizer.ggml.unknown_token_id", T_UINT32, v["unk"]))
    kv += [("tokenizer.ggml.add_bos_token", T_BOOL, v["add_bos"]), ("tokenizer.ggml.add_eos_token", T_BOOL, False)]
    return kv


def write(name, path):
    p = SHAPES[name]
    v = bpe_vocab(p["n_vocab"]) if p["vocab"] == "bpe" else spm_vocab(p["n_vocab"])
    assert len(v["tokens"]) == p["n_vocab"]
    kv = metadata(name, p, v)
    ts = tensors(p)
    infos, offset = [], 0
    for tname, shape, kind in ts:
        ttype = F32 if kind in ("norm", "bias", "router") else F16
        nbytes = int(np.prod(shape)) * (4 if ttype == F32 else 2)
        infos.append(pack_str(tname) + struct.pack("<I", len(shape)) +
                     struct.pack("<%dQ" % len(shape), *reversed(shape)) + struct.pack("<IQ", ttype, offset))
        offset += (nbytes + ALIGN - 1) // ALIGN * ALIGN
    head = b"GGUF" + struct.pack("<IQQ", 3, len(ts), len(kv)) + b"".join(pack_kv(*k) for k in kv) + b"".join(infos)
    with open(path + ".part", "wb") as f:
        f.write(head + b"\0" * ((-len(head)) % ALIGN))
        for tname, shape, kind in ts:
            data = values(tname, shape, kind).tobytes()
            f.write(data + b"\0" * ((-len(data)) % ALIGN))
    os.rename(path + ".part", path)


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) > 1 else 2
    out = sys.argv[1]
    names = sys.argv[2:] or list(SHAPES)
    os.makedirs(out, exist_ok=True)
    for name in names:
        if name not in SHAPES:
            print("unknown shape %s (%s)" % (name, ", ".join(SHAPES)), file=sys.stderr)
            return 2
        path = os.path.join(out, name + "-f16.gguf")
        if not os.path.exists(path):
            write(name, path)
        print(path, os.path.getsize(path), "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
