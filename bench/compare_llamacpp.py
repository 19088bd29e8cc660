#!/usr/bin/env python3
"""Runs `loom bench` on the shared models that llama.cpp was measured on and
prints a markdown table of loom's tokens/s beside llama.cpp's (the no-AMX
build's llama-bench JSON in ../shared/golden/bench/raw), with the ratio.

usage: bench/compare_llamacpp.py [--loom build/loom] [--shared ../shared]
                                 [--threads 1,2] [--reps 5] [MODEL ...]
Both sides: pp64 (one 64-token batch) and tg64 (64 tokens one at a time),
f16 KV cache. Run it on an otherwise idle machine.
"""
import argparse
import json
import os
import subprocess
import sys

DEFAULT_MODELS = [
    "stories260K-f32", "stories260K-f16", "llama-2-tiny-random",
    "stories-llama-d256-f32", "stories-llama-d256-f16", "stories-llama-d256-q8_0",
]


def loom_bench(loom, model, threads, reps):
    out = subprocess.run([loom, "bench", "-m", model, "-p", "64", "-n", "64", "-t", str(threads),
                          "-r", str(reps), "-o", "json"], check=True, capture_output=True, text=True).stdout
    return {("pp" if t["n_prompt"] else "tg"): t for t in json.loads(out)}


def llamacpp(shared, name, threads):
    path = os.path.join(shared, "golden", "bench", "raw", f"build-noamx_{name}_t{threads}.json")
    with open(path) as f:
        return {("pp" if t["n_prompt"] else "tg"): t for t in json.load(f)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loom", default="build/loom")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("models", nargs="*", default=DEFAULT_MODELS)
    a = ap.parse_args()
    print("| model | threads | test | loom t/s | llama.cpp t/s | loom / llama.cpp |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    for name in a.models:
        for threads in [int(t) for t in a.threads.split(",")]:
            ours = loom_bench(a.loom, os.path.join(a.shared, "models", name + ".gguf"), threads, a.reps)
            ref = llamacpp(a.shared, name, threads)
            for test in ("pp", "tg"):
                o, r = ours[test], ref[test]
                print(f"| {name} | {threads} | {test}64 | {o['avg_ts']:.0f} ± {o['stddev_ts']:.0f} | "
                      f"{r['avg_ts']:.0f} ± {r['stddev_ts']:.0f} | {o['avg_ts'] / r['avg_ts']:.2f} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
