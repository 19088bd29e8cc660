#!/usr/bin/env python3
"""transformers_check.py - loom against Hugging Face transformers on the
checkpoints test_hf_synthetic writes (build/tmp/hf-NAME: the family
models of test_families as safetensors), where PyTorch and transformers are
installed (the GPU machine; bench/transformers_check.sh carries them there):

    transformers_check.py [--device cpu|cuda] DIR...

For each checkpoint, the logits of test_hf_synthetic's token sequence at
every position: transformers' (float32 weights and activations, eager
attention) and loom's through its Python package (the library
$LOOM_LIBRARY names, the plugins $LOOM_PLUGINS names). The checkpoints'
config.json hold what loom reads; transformers' loader also wants the
vocabulary size, whether the head is tied and, for MXFP4 experts, the
quantization method: a copy of each gets them (read off its tensors)
first. Prints the largest difference, how many positions' greedy token
agree, and exits 1 if a checkpoint is outside its type's band."""
import argparse
import json
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

TOKENS = [1, 17, 290, 42, 99, 250, 7, 280, 3, 64]  # test_hf_synthetic's logits_of

# The largest logit difference allowed by the checkpoint's weight type:
# float32 sums in another order; f16 and bf16 weights meet loom's rounded
# activations (test_hf_synthetic's bands against a converted file).
BANDS = {"F32": 1e-3, "F16": 5e-2, "BF16": 0.2, "U8": 1e-3}


def tensor_table(path):
    """name -> (dtype, shape) of every tensor of the checkpoint."""
    files = [f for f in os.listdir(path) if f.endswith(".safetensors")]
    table = {}
    for name in files:
        with open(os.path.join(path, name), "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(size))
        for key, entry in header.items():
            if key != "__metadata__":
                table[key] = (entry["dtype"], entry["shape"])
    return table


def weight_type(table):
    """The checkpoint's float type (MXFP4 experts aside, as U8)."""
    kinds = {dtype for dtype, _ in table.values() if dtype != "U8"}
    return kinds.pop() if len(kinds) == 1 else "F32"


def completed_config(config, table):
    """config.json as transformers' loader wants it."""
    embed = next(k for k in table if k.endswith("embed_tokens.weight"))
    config["vocab_size"] = table[embed][1][0]
    config["tie_word_embeddings"] = not any(k.endswith("lm_head.weight") for k in table)
    if any(k.endswith("_blocks") for k in table):
        config["quantization_config"] = {"quant_method": "mxfp4"}
    return config


def transformers_logits(path, device):
    import torch
    from transformers import AutoModelForCausalLM

    kwargs = {"attn_implementation": "eager"}
    config = json.load(open(os.path.join(path, "config.json")))
    if "quantization_config" in config:
        from transformers import Mxfp4Config

        kwargs["quantization_config"] = Mxfp4Config(dequantize=True)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **kwargs)
    except TypeError:  # transformers before 4.56 names it torch_dtype
        model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32, **kwargs)
    model = model.to(device).eval()
    with torch.no_grad():
        out = model(torch.tensor([TOKENS], device=device)).logits[0]
    return out.float().cpu().numpy()


def loom_logits(path):
    import loom

    with loom.Model(path) as model, loom.Context(model, n_ctx=64) as ctx:
        ctx.decode(TOKENS, logits=True)
        return np.array([np.asarray(ctx.logits(i), dtype=np.float32) for i in range(len(TOKENS))])


def check(path, device):
    table = tensor_table(path)
    kind = weight_type(table)
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, os.path.basename(path))
        shutil.copytree(path, copy)
        config = json.load(open(os.path.join(copy, "config.json")))
        json.dump(completed_config(config, table), open(os.path.join(copy, "config.json"), "w"), indent=1)
        want = transformers_logits(copy, device)
    got = loom_logits(path)
    diff = float(np.max(np.abs(got - want)))
    agree = int(np.sum(np.argmax(got, axis=1) == np.argmax(want, axis=1)))
    band = BANDS.get(kind, 1e-3)
    ok = diff <= band
    print("%-32s %-5s max |loom - transformers| %.3g (band %g), greedy %d/%d %s" %
          (os.path.basename(path), kind, diff, band, agree, len(TOKENS), "ok" if ok else "OUTSIDE"), flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("dirs", nargs="+")
    args = ap.parse_args()
    bad = 0
    for path in args.dirs:
        try:
            bad += not check(path, args.device)
        except Exception as e:  # one checkpoint's failure must not hide the others'
            print("%-32s failed: %s: %s" % (os.path.basename(path), type(e).__name__, e), flush=True)
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
