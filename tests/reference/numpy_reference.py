#!/usr/bin/env python3
"""numpy_reference.py - a float64 forward pass of the families the reference
llama.cpp does not know, written from Hugging Face's modeling code, writing
the same reference files as llama_reference.c (tests/reference/README.md).

    numpy_reference.py MODEL.gguf NAME OUT.ref ID...

Reads the GGUF file itself (F32, F16, Q8_0, MXFP4, Q4_K, Q5_K and Q6_K
tensors, dequantized to float64), runs the prompt through the whole model, records the logits at
prompt positions 0, 4, 9, 14 and the last, then decodes 12 greedy tokens,
re-running the whole sequence each step (no cache), recording each id, its
logit and its lead over the runner-up. For a mixture of experts it also
records each recorded position's routing margin (see ROUTE_MARGIN).

Families, as transformers' modeling files compute them:
  qwen3moe  Qwen3MoeForCausalLM: per-head RMSNorm of q and k before a
            rotate-half RoPE, a softmax router whose top-k weights are
            renormalised (norm_topk_prob), SwiGLU experts.
  gemma3    Gemma3ForCausalLM (text): embeddings times sqrt(hidden), per-head
            q/k norms, post-attention and post-FFN norms, GELU (tanh) GeGLU,
            a sliding window on five layers of six whose RoPE base is
            rope_local_base_freq and unscaled, the global layers' base with
            linear scaling; q.k times query_pre_attn_scalar^-1/2 (head_dim).
  gpt-oss   GptOssForCausalLM: q/k/v/o biases, each head's sink logit as an
            extra softmax column dropped after, a window on even layers, a
            router with a bias whose top-k logits are softmaxed, experts with
            biases through gate = min(gate, 7), up = clamp(up, -7, 7),
            (up + 1) * gate * sigmoid(1.702 gate); the FFN's norm is the
            file's post_attention_norm.
  olmo2     Olmo3ForCausalLM (Olmo2ForCausalLM where no layer has a window;
            llama.cpp's converter writes both as olmo2): no pre-norms, an
            RMSNorm over all of q and of k before a rotate-half RoPE,
            post-attention and post-FFN norms, SwiGLU, and a window on the
            layers sliding_window_pattern flags (a list), or on all but
            every n-th (a number).
  smollm3   SmolLM3ForCausalLM: the llama block with no RoPE on every fourth
            layer (no_rope_layers from no_rope_layer_interval 4, which
            llama.cpp fixes), tied embeddings. Its GGUF keeps q and k rows in
            llama.cpp's permutation of transformers' order, under which
            rotate_half's pairs (i, i + d/2) are adjacent: (2i, 2i + 1).
  glm4      Glm4ForCausalLM: RMSNorms before and after the attention and the
            FFN, q/k/v biases, RoPE on the first rope.dimension_count of each
            head in adjacent pairs (transformers' interleaved rotate_half),
            one gate_up matrix, gate first.
  dots1     Dots1ForCausalLM: qwen3's attention, a dense first layer, then a
            router whose sigmoid scores plus e_score_correction_bias choose
            the experts and whose scores alone weigh them (renormalised,
            times routed_scaling_factor), and shared experts added unweighted.
The GGUF stores Gemma's norm weights as 1 + w, as llama.cpp's converter
writes them; RoPE pairs (i, i + d/2), as Hugging Face's rotate_half.
"""
import struct
import sys

import numpy as np

GREEDY_STEPS = 12

# Each position's routing margin: over its mixture-of-experts layers, the
# least lead of the last chosen expert's score over the best one left out.
# A quantized runtime's activations move router scores a little; where the
# margin is that small, its choice of experts may differ from float64's.
ROUTE_MARGIN = {}


def route(scores, k, row):
    """The indices of the k best scores (ties to the lower index), noting
    the margin at this position."""
    order = np.argsort(-scores, kind="stable")
    margin = scores[order[k - 1]] - scores[order[k]] if k < len(scores) else np.inf
    ROUTE_MARGIN[row] = min(ROUTE_MARGIN.get(row, np.inf), float(margin))
    return order[:k]

# ---- GGUF ------------------------------------------------------------------

SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.at:self.at + n].decode("utf-8")
        self.at += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            inner, n = self.take("<I"), self.take("<Q")
            return [self.value(inner) for _ in range(n)]
        return self.take(SCALAR[t])


def read_gguf(path):
    data = open(path, "rb").read()
    r = Reader(data)
    assert r.take("<I") == 0x46554747, "not a GGUF file"
    r.take("<I")
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take("<Q") for _ in range(r.take("<I"))]
        infos.append((name, dims, r.take("<I"), r.take("<Q")))
    align = meta.get("general.alignment", 32)
    base = (r.at + align - 1) // align * align
    tensors = {}
    for name, dims, dtype, offset in infos:
        count = int(np.prod(dims))
        at = base + offset
        if dtype == 0:
            v = np.frombuffer(data, np.float32, count, at).astype(np.float64)
        elif dtype == 1:
            v = np.frombuffer(data, np.float16, count, at).astype(np.float64)
        elif dtype == 8:
            blocks = np.frombuffer(data, np.uint8, count // 32 * 34, at).reshape(-1, 34)
            d = blocks[:, :2].copy().view(np.float16).astype(np.float64)
            q = blocks[:, 2:].copy().view(np.int8).astype(np.float64)
            v = (q * d).reshape(-1)
        elif dtype == 39:
            # MXFP4: a power of two 2^(e - 127), then E2M1 values in nibbles
            # (element j low, j + 16 high), OCP's microscaling format.
            e2m1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, 0, -.5, -1, -1.5, -2, -3, -4, -6])
            blocks = np.frombuffer(data, np.uint8, count // 32 * 17, at).reshape(-1, 17)
            scale = np.ldexp(1.0, blocks[:, :1].astype(np.int64) - 127)
            q = np.concatenate([blocks[:, 1:] & 15, blocks[:, 1:] >> 4], axis=1)
            v = (e2m1[q] * scale).reshape(-1)
        else:
            v = dequantize_k(data, at, count, dtype, name)
        # ggml order {ne0, ne1, ...}: numpy's shape is reversed.
        tensors[name] = v.reshape(list(reversed(dims)))
    return meta, tensors


# The k-quants, as ggml lays their 256-value blocks out.
K_BLOCK = {12: 144, 13: 176, 14: 210}  # Q4_K, Q5_K, Q6_K


def k_scales(sc):
    """Q4_K's and Q5_K's twelve bytes: eight 6-bit scales and mins."""
    sc = sc.astype(np.int64)
    scale, mins = np.zeros((len(sc), 8), np.int64), np.zeros((len(sc), 8), np.int64)
    scale[:, :4], mins[:, :4] = sc[:, :4] & 63, sc[:, 4:8] & 63
    scale[:, 4:] = (sc[:, 8:] & 15) | ((sc[:, :4] >> 6) << 4)
    mins[:, 4:] = (sc[:, 8:] >> 4) | ((sc[:, 4:8] >> 6) << 4)
    return scale, mins


def dequantize_k(data, at, count, dtype, name):
    if dtype not in K_BLOCK:
        raise SystemExit(f"{name}: GGUF type {dtype} is not read here")
    b = np.frombuffer(data, np.uint8, count // 256 * K_BLOCK[dtype], at).reshape(-1, K_BLOCK[dtype])
    if dtype == 14:
        # Q6_K: ql[128], qh[64], int8 scales[16], f16 d; each half of 128
        # values takes 64 ql and 32 qh bytes, four values a byte pair.
        ql, qh = b[:, :128].astype(np.int64), b[:, 128:192].astype(np.int64)
        sc = b[:, 192:208].copy().view(np.int8).astype(np.float64)
        d = b[:, 208:210].copy().view(np.float16).astype(np.float64)
        q = np.zeros((len(b), 256), np.int64)
        for half in range(2):
            l, h, o = ql[:, 64 * half:64 * half + 64], qh[:, 32 * half:32 * half + 32], 128 * half
            q[:, o:o + 32] = (l[:, :32] & 15) | ((h & 3) << 4)
            q[:, o + 32:o + 64] = (l[:, 32:] & 15) | (((h >> 2) & 3) << 4)
            q[:, o + 64:o + 96] = (l[:, :32] >> 4) | (((h >> 4) & 3) << 4)
            q[:, o + 96:o + 128] = (l[:, 32:] >> 4) | (((h >> 6) & 3) << 4)
        return ((q - 32) * np.repeat(sc, 16, axis=1) * d).reshape(-1)
    # Q4_K and Q5_K: f16 d and dmin, the scales, (Q5_K: qh[32]), qs[128];
    # sub-block j of 32 is d * scale_j * q - dmin * min_j, its nibbles the
    # low (j even) or high (j odd) halves of qs[32 (j / 2) ...].
    d = b[:, 0:2].copy().view(np.float16).astype(np.float64)
    dmin = b[:, 2:4].copy().view(np.float16).astype(np.float64)
    scale, mins = k_scales(b[:, 4:16])
    qs = b[:, 16:144].astype(np.int64) if dtype == 12 else b[:, 48:176].astype(np.int64)
    q = np.zeros((len(b), 256), np.int64)
    for j in range(8):
        nib = qs[:, 32 * (j // 2):32 * (j // 2) + 32]
        q[:, 32 * j:32 * j + 32] = (nib >> 4) if j % 2 else (nib & 15)
        if dtype == 13:
            q[:, 32 * j:32 * j + 32] += ((b[:, 16:48].astype(np.int64) >> j) & 1) << 4
    v = d * np.repeat(scale, 32, axis=1) * q - dmin * np.repeat(mins, 32, axis=1)
    return v.reshape(-1)


# ---- pieces -----------------------------------------------------------------


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, base, scale):
    """x: [tokens, heads, d]; rotate_half pairs (i, i + d/2), angle
    pos / scale * base^(-2i/d)."""
    d = x.shape[-1]
    inv = base ** (-np.arange(0, d, 2, dtype=np.float64) / d) / scale
    ang = pos[:, None] * inv[None, :]
    cos = np.concatenate([np.cos(ang)] * 2, axis=-1)[:, None, :]
    sin = np.concatenate([np.sin(ang)] * 2, axis=-1)[:, None, :]
    half = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1)
    return x * cos + half * sin


def attention(q, k, v, scale, window, sinks=None):
    """q: [T, H, d], k, v: [T, Hkv, d]; causal, and within `window`
    positions when it is nonzero; sinks[h]: a logit column of head h's
    softmax that weights no value."""
    t, h, d = q.shape
    group = h // k.shape[1]
    out = np.zeros((t, h, d))
    for head in range(h):
        kh, vh = k[:, head // group], v[:, head // group]
        s = q[:, head] @ kh.T * scale
        i, j = np.arange(t)[:, None], np.arange(t)[None, :]
        seen = (j <= i) & ((window == 0) | (i - j < window))
        s = np.where(seen, s, -np.inf)
        if sinks is not None:
            s = np.concatenate([s, np.full((t, 1), sinks[head])], axis=1)
        s = np.exp(s - s.max(axis=1, keepdims=True))
        p = s / s.sum(axis=1, keepdims=True)
        out[:, head] = p[:, :t] @ vh
    return out


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def linear(w, x):
    """w in numpy's order [n_out, n_in]."""
    return x @ w.T


def block_shape(meta, a):
    """What every family's block reads of architecture a: heads, kv heads,
    layers, a head's width (key_length, else n_embd / heads), the norms'
    epsilon and the RoPE base."""
    n_head, n_embd = meta[f"{a}.attention.head_count"], meta[f"{a}.embedding_length"]
    return (n_head, meta[f"{a}.attention.head_count_kv"], meta[f"{a}.block_count"],
            meta.get(f"{a}.attention.key_length", n_embd // n_head),
            meta[f"{a}.attention.layer_norm_rms_epsilon"], meta[f"{a}.rope.freq_base"])


def output_logits(w, x, eps):
    """The final norm and the output head (the token embedding where the
    file ties it)."""
    x = rms_norm(x, w["output_norm.weight"], eps)
    return linear(w.get("output.weight", w["token_embd.weight"]), x)


# ---- families -----------------------------------------------------------------


def qwen3moe(meta, w, tokens):
    a = "qwen3moe"
    n_head, n_kv = meta[f"{a}.attention.head_count"], meta[f"{a}.attention.head_count_kv"]
    hd = meta[f"{a}.attention.key_length"]
    eps, base = meta[f"{a}.attention.layer_norm_rms_epsilon"], meta[f"{a}.rope.freq_base"]
    k_used = meta[f"{a}.expert_used_count"]
    pos = np.arange(len(tokens), dtype=np.float64)
    x = w["token_embd.weight"][tokens]
    for il in range(meta[f"{a}.block_count"]):
        p = f"blk.{il}."
        h = rms_norm(x, w[p + "attn_norm.weight"], eps)
        q = linear(w[p + "attn_q.weight"], h).reshape(len(tokens), n_head, hd)
        k = linear(w[p + "attn_k.weight"], h).reshape(len(tokens), n_kv, hd)
        v = linear(w[p + "attn_v.weight"], h).reshape(len(tokens), n_kv, hd)
        q = rope(rms_norm(q, w[p + "attn_q_norm.weight"], eps), pos, base, 1.0)
        k = rope(rms_norm(k, w[p + "attn_k_norm.weight"], eps), pos, base, 1.0)
        x = x + linear(w[p + "attn_output.weight"], attention(q, k, v, hd ** -0.5, 0).reshape(len(tokens), -1))
        h = rms_norm(x, w[p + "ffn_norm.weight"], eps)
        logits = linear(w[p + "ffn_gate_inp.weight"], h)
        probs = np.exp(logits - logits.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        out = np.zeros_like(x)
        for t in range(len(tokens)):
            chosen = route(logits[t], k_used, t)
            weights = probs[t, chosen] / probs[t, chosen].sum()
            for e, we in zip(chosen, weights):
                g = linear(w[p + "ffn_gate_exps.weight"][e], h[t])
                u = linear(w[p + "ffn_up_exps.weight"][e], h[t])
                out[t] += we * linear(w[p + "ffn_down_exps.weight"][e], silu(g) * u)
        x = x + out
    return output_logits(w, x, eps)


def gemma3(meta, w, tokens):
    a = "gemma3"
    n_head, n_kv = meta[f"{a}.attention.head_count"], meta[f"{a}.attention.head_count_kv"]
    hd, n_embd = meta[f"{a}.attention.key_length"], meta[f"{a}.embedding_length"]
    eps, base = meta[f"{a}.attention.layer_norm_rms_epsilon"], meta[f"{a}.rope.freq_base"]
    scale = meta.get(f"{a}.rope.scaling.factor", 1.0) if meta.get(f"{a}.rope.scaling.type") == "linear" else 1.0
    window, pattern, local_base = meta[f"{a}.attention.sliding_window"], 6, 10000.0
    pos = np.arange(len(tokens), dtype=np.float64)
    x = w["token_embd.weight"][tokens] * np.sqrt(n_embd)
    for il in range(meta[f"{a}.block_count"]):
        p = f"blk.{il}."
        local = (il + 1) % pattern != 0
        h = rms_norm(x, w[p + "attn_norm.weight"], eps)
        q = linear(w[p + "attn_q.weight"], h).reshape(len(tokens), n_head, hd)
        k = linear(w[p + "attn_k.weight"], h).reshape(len(tokens), n_kv, hd)
        v = linear(w[p + "attn_v.weight"], h).reshape(len(tokens), n_kv, hd)
        q = rms_norm(q, w[p + "attn_q_norm.weight"], eps)
        k = rms_norm(k, w[p + "attn_k_norm.weight"], eps)
        q = rope(q, pos, local_base if local else base, 1.0 if local else scale)
        k = rope(k, pos, local_base if local else base, 1.0 if local else scale)
        o = linear(w[p + "attn_output.weight"],
                   attention(q, k, v, hd ** -0.5, window if local else 0).reshape(len(tokens), -1))
        x = x + rms_norm(o, w[p + "post_attention_norm.weight"], eps)
        h = rms_norm(x, w[p + "ffn_norm.weight"], eps)
        f = linear(w[p + "ffn_down.weight"],
                   gelu_tanh(linear(w[p + "ffn_gate.weight"], h)) * linear(w[p + "ffn_up.weight"], h))
        x = x + rms_norm(f, w[p + "post_ffw_norm.weight"], eps)
    return output_logits(w, x, eps)


def gpt_oss(meta, w, tokens):
    a = "gpt-oss"
    n_head, n_kv = meta[f"{a}.attention.head_count"], meta[f"{a}.attention.head_count_kv"]
    hd = meta[f"{a}.attention.key_length"]
    eps, base = meta[f"{a}.attention.layer_norm_rms_epsilon"], meta[f"{a}.rope.freq_base"]
    window, k_used = meta[f"{a}.attention.sliding_window"], meta[f"{a}.expert_used_count"]
    alpha, limit = 1.702, 7.0
    t = len(tokens)
    pos = np.arange(t, dtype=np.float64)
    x = w["token_embd.weight"][tokens]
    for il in range(meta[f"{a}.block_count"]):
        p = f"blk.{il}."
        h = rms_norm(x, w[p + "attn_norm.weight"], eps)
        q = (linear(w[p + "attn_q.weight"], h) + w[p + "attn_q.bias"]).reshape(t, n_head, hd)
        k = (linear(w[p + "attn_k.weight"], h) + w[p + "attn_k.bias"]).reshape(t, n_kv, hd)
        v = (linear(w[p + "attn_v.weight"], h) + w[p + "attn_v.bias"]).reshape(t, n_kv, hd)
        q, k = rope(q, pos, base, 1.0), rope(k, pos, base, 1.0)
        o = attention(q, k, v, hd ** -0.5, window if il % 2 == 0 else 0, w[p + "attn_sinks.weight"])
        x = x + linear(w[p + "attn_output.weight"], o.reshape(t, -1)) + w[p + "attn_output.bias"]
        h = rms_norm(x, w[p + "ffn_norm.weight"], eps)
        logits = linear(w[p + "ffn_gate_inp.weight"], h) + w[p + "ffn_gate_inp.bias"]
        out = np.zeros_like(x)
        for i in range(t):
            chosen = route(logits[i], k_used, i)
            top = np.exp(logits[i, chosen] - logits[i, chosen].max())
            for e, we in zip(chosen, top / top.sum()):
                g = linear(w[p + "ffn_gate_exps.weight"][e], h[i]) + w[p + "ffn_gate_exps.bias"][e]
                u = linear(w[p + "ffn_up_exps.weight"][e], h[i]) + w[p + "ffn_up_exps.bias"][e]
                g = np.minimum(g, limit)
                u = np.clip(u, -limit, limit)
                y = linear(w[p + "ffn_down_exps.weight"][e], (u + 1.0) * g / (1.0 + np.exp(-alpha * g)))
                out[i] += we * (y + w[p + "ffn_down_exps.bias"][e])
        x = x + out
    x = rms_norm(x, w["output_norm.weight"], eps)
    return linear(w["output.weight"], x)


def dots1(meta, w, tokens):
    a = "dots1"
    n_head, n_kv = meta[f"{a}.attention.head_count"], meta[f"{a}.attention.head_count_kv"]
    hd = meta[f"{a}.attention.key_length"]
    eps, base = meta[f"{a}.attention.layer_norm_rms_epsilon"], meta[f"{a}.rope.freq_base"]
    k_used, n_dense = meta[f"{a}.expert_used_count"], meta[f"{a}.leading_dense_block_count"]
    norm_topk, scale = meta[f"{a}.expert_weights_norm"], meta[f"{a}.expert_weights_scale"]
    t = len(tokens)
    pos = np.arange(t, dtype=np.float64)

    def mlp(p, h):
        return linear(w[p.replace("*", "down")],
                      silu(linear(w[p.replace("*", "gate")], h)) * linear(w[p.replace("*", "up")], h))

    x = w["token_embd.weight"][tokens]
    for il in range(meta[f"{a}.block_count"]):
        p = f"blk.{il}."
        h = rms_norm(x, w[p + "attn_norm.weight"], eps)
        q = linear(w[p + "attn_q.weight"], h).reshape(t, n_head, hd)
        k = linear(w[p + "attn_k.weight"], h).reshape(t, n_kv, hd)
        v = linear(w[p + "attn_v.weight"], h).reshape(t, n_kv, hd)
        q = rope(rms_norm(q, w[p + "attn_q_norm.weight"], eps), pos, base, 1.0)
        k = rope(rms_norm(k, w[p + "attn_k_norm.weight"], eps), pos, base, 1.0)
        x = x + linear(w[p + "attn_output.weight"], attention(q, k, v, hd ** -0.5, 0).reshape(t, -1))
        h = rms_norm(x, w[p + "ffn_norm.weight"], eps)
        if il < n_dense:
            x = x + mlp(p + "ffn_*.weight", h)
            continue
        # Dots1TopkRouter: sigmoid scores, chosen by score + correction
        # bias (one group), weighted by the scores, renormalised, scaled.
        scores = 1.0 / (1.0 + np.exp(-linear(w[p + "ffn_gate_inp.weight"], h)))
        choice = scores + w[p + "exp_probs_b.bias"]
        out = np.zeros_like(x)
        for i in range(t):
            chosen = route(choice[i], k_used, i)
            weights = scores[i, chosen]
            if norm_topk:
                weights = weights / (weights.sum() + 1e-20)
            for e, we in zip(chosen, weights * scale):
                g = linear(w[p + "ffn_gate_exps.weight"][e], h[i])
                u = linear(w[p + "ffn_up_exps.weight"][e], h[i])
                out[i] += we * linear(w[p + "ffn_down_exps.weight"][e], silu(g) * u)
        x = x + out + mlp(p + "ffn_*_shexp.weight", h)
    return output_logits(w, x, eps)


def rope_adjacent(x, pos, base):
    """rope() for q and k rows in llama.cpp's permuted order: pair i is
    (2i, 2i + 1)."""
    d = x.shape[-1]
    ang = pos[:, None] * (base ** (-np.arange(0, d, 2, dtype=np.float64) / d))[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def smollm3(meta, w, tokens):
    n_head, n_kv, n_layer, hd, eps, base = block_shape(meta, "smollm3")
    use_rope = [(il + 1) % 4 != 0 for il in range(n_layer)]
    pos = np.arange(len(tokens), dtype=np.float64)
    x = w["token_embd.weight"][tokens]
    for il in range(n_layer):
        p = f"blk.{il}."
        h = rms_norm(x, w[p + "attn_norm.weight"], eps)
        q = linear(w[p + "attn_q.weight"], h).reshape(len(tokens), n_head, hd)
        k = linear(w[p + "attn_k.weight"], h).reshape(len(tokens), n_kv, hd)
        v = linear(w[p + "attn_v.weight"], h).reshape(len(tokens), n_kv, hd)
        if use_rope[il]:
            q, k = rope_adjacent(q, pos, base), rope_adjacent(k, pos, base)
        x = x + linear(w[p + "attn_output.weight"], attention(q, k, v, hd ** -0.5, 0).reshape(len(tokens), -1))
        h = rms_norm(x, w[p + "ffn_norm.weight"], eps)
        x = x + linear(w[p + "ffn_down.weight"], silu(linear(w[p + "ffn_gate.weight"], h)) * linear(w[p + "ffn_up.weight"], h))
    return output_logits(w, x, eps)


def glm4(meta, w, tokens):
    n_head, n_kv, n_layer, hd, eps, base = block_shape(meta, "glm4")
    n_rot = meta["glm4.rope.dimension_count"]
    pos = np.arange(len(tokens), dtype=np.float64)
    x = w["token_embd.weight"][tokens]

    def partial_rope(t):
        return np.concatenate([rope_adjacent(t[..., :n_rot], pos, base), t[..., n_rot:]], axis=-1)

    for il in range(n_layer):
        p = f"blk.{il}."
        h = rms_norm(x, w[p + "attn_norm.weight"], eps)
        q = (linear(w[p + "attn_q.weight"], h) + w[p + "attn_q.bias"]).reshape(len(tokens), n_head, hd)
        k = (linear(w[p + "attn_k.weight"], h) + w[p + "attn_k.bias"]).reshape(len(tokens), n_kv, hd)
        v = (linear(w[p + "attn_v.weight"], h) + w[p + "attn_v.bias"]).reshape(len(tokens), n_kv, hd)
        o = linear(w[p + "attn_output.weight"],
                   attention(partial_rope(q), partial_rope(k), v, hd ** -0.5, 0).reshape(len(tokens), -1))
        x = x + rms_norm(o, w[p + "post_attention_norm.weight"], eps)
        h = rms_norm(x, w[p + "ffn_norm.weight"], eps)
        gate, up = np.split(linear(w[p + "ffn_up.weight"], h), 2, axis=-1)
        f = linear(w[p + "ffn_down.weight"], silu(gate) * up)
        x = x + rms_norm(f, w[p + "post_ffw_norm.weight"], eps)
    return output_logits(w, x, eps)


def olmo2(meta, w, tokens):
    n_head, n_kv, n_layer, hd, eps, base = block_shape(meta, "olmo2")
    window = meta.get("olmo2.attention.sliding_window", 0)
    pattern = meta.get("olmo2.attention.sliding_window_pattern", 4)
    windowed = list(pattern) if isinstance(pattern, list) else [(il + 1) % pattern != 0 for il in range(n_layer)]
    pos = np.arange(len(tokens), dtype=np.float64)
    x = w["token_embd.weight"][tokens]
    for il in range(n_layer):
        p = f"blk.{il}."
        q = rms_norm(linear(w[p + "attn_q.weight"], x), w[p + "attn_q_norm.weight"], eps)
        k = rms_norm(linear(w[p + "attn_k.weight"], x), w[p + "attn_k_norm.weight"], eps)
        v = linear(w[p + "attn_v.weight"], x).reshape(len(tokens), n_kv, hd)
        q = rope(q.reshape(len(tokens), n_head, hd), pos, base, 1.0)
        k = rope(k.reshape(len(tokens), n_kv, hd), pos, base, 1.0)
        o = linear(w[p + "attn_output.weight"],
                   attention(q, k, v, hd ** -0.5, window if windowed[il] else 0).reshape(len(tokens), -1))
        x = x + rms_norm(o, w[p + "post_attention_norm.weight"], eps)
        f = linear(w[p + "ffn_down.weight"], silu(linear(w[p + "ffn_gate.weight"], x)) * linear(w[p + "ffn_up.weight"], x))
        x = x + rms_norm(f, w[p + "post_ffw_norm.weight"], eps)
    return output_logits(w, x, eps)


FAMILIES = {"qwen3moe": qwen3moe, "gemma3": gemma3, "gpt-oss": gpt_oss, "dots1": dots1, "olmo2": olmo2,
            "smollm3": smollm3, "glm4": glm4}


def main():
    if len(sys.argv) < 5:
        raise SystemExit("usage: numpy_reference.py MODEL.gguf NAME OUT.ref ID...")
    meta, w = read_gguf(sys.argv[1])
    forward = FAMILIES[meta["general.architecture"]]
    tokens = [int(t) for t in sys.argv[4:]]
    n = len(tokens)
    logits = forward(meta, w, np.array(tokens))
    with open(sys.argv[3], "w") as out:
        out.write(f"# {sys.argv[2]}: a float64 numpy forward pass's logits and greedy continuation "
                  "(tests/reference/numpy_reference.py)\n")
        out.write(f"n_vocab {logits.shape[1]}\nprompt {n} {' '.join(map(str, tokens))}\n")
        for p in range(n):
            if p % 5 == 4 or p == 0 or p == n - 1:
                out.write(f"logits {p} " + " ".join(f"{v:.9g}" for v in logits[p].astype(np.float32)) + "\n")
                if p in ROUTE_MARGIN:
                    out.write(f"route {p} {ROUTE_MARGIN[p]:.9g}\n")
        seq = list(tokens)
        last = logits[-1]
        for step in range(GREEDY_STEPS):
            order = np.argsort(-last, kind="stable")
            best = int(order[0])
            out.write(f"greedy {step} {best} {np.float32(last[best]):.9g} "
                      f"{np.float32(last[best] - last[order[1]]):.9g}\n")
            seq.append(best)
            last = forward(meta, w, np.array(seq))[-1]


if __name__ == "__main__":
    main()
