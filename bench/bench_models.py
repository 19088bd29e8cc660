#!/usr/bin/env python3
"""Runs `loom bench` on the realistic-shape benchmark models of
../shared/golden/bench/llama-cpp-cpu.md (made by bench/make_models.sh) and
prints a markdown table beside llama.cpp's figures from that page.

usage: bench/bench_models.py [--loom build/loom] [--shared ../shared]
                             [--models DIR] [--reps 3] [MODEL[:THREADS] ...]

Each run is pp64 (one 64-token batch) and tg32 (32 tokens one at a time from
an empty context), f16 KV cache, as llama-bench ran them. The machine's
speed drifts between runs, so the memory read bandwidth is measured before
and after each with ../shared/tools/membw.c (8 streams per thread, the best
of 10 passes, as the page did), and decode is also compared per GB/s:
(loom tg / loom's bandwidth) / (llama.cpp tg / the page's bandwidth).
Run it on an otherwise idle machine.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

DEFAULT_RUNS = ["small-q8_0:2", "small-q4_0:2", "small-q4_k_m:2",
                "tiny1b-q8_0:2", "tiny1b-q4_0:2", "tiny1b-q4_k_m:2"]


def parse_page(path):
    """{(build, file, threads): (pp, tg, weight_mb)} and {(build, threads): bw}."""
    runs, bw = {}, {}
    build = None
    with open(path) as f:
        for line in f:
            if line.startswith("## Results: no-AMX"):
                build = "no-AMX"
            elif line.startswith("## Results: native"):
                build = "native"
            elif line.startswith("During the native"):
                build = "native"
            elif line.startswith("During the no-AMX"):
                build = "no-AMX"
            m = re.match(r"\| (\S+\.gguf) \| \d+ \| (\d) \| ([\d.]+) .*?\| ([\d.]+) \[.*?\| ([\d.]+) MB \|", line)
            if m and build:
                runs[(build, m.group(1), int(m.group(2)))] = (float(m.group(3)), float(m.group(4)),
                                                              float(m.group(5)))
            m = re.match(r"- (\d) thread\(s\), 8 stream\(s\)/thread: best-of-10 ([\d., ]+) GB/s", line)
            if m and build:
                bw[(build, int(m.group(1)))] = statistics.median(float(v) for v in m.group(2).split(","))
    return runs, bw


def membw(binary, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="true")
    out = subprocess.run([binary, "10", "8"], check=True, capture_output=True, text=True, env=env).stdout
    return float(re.search(r"best ([\d.]+) GB/s", out).group(1))


def loom_bench(loom, model, threads, reps):
    out = subprocess.run([loom, "bench", "-m", model, "-p", "64", "-n", "32", "-t", str(threads),
                          "-r", str(reps), "-o", "json"], check=True, capture_output=True, text=True).stdout
    return {("pp" if t["n_prompt"] else "tg"): t["avg_ts"] for t in json.loads(out)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loom", default="build/loom")
    ap.add_argument("--shared", default=os.environ.get("LOOM_TEST_DATA", "../shared"))
    ap.add_argument("--models", default="bench-models")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("runs", nargs="*", default=DEFAULT_RUNS)
    a = ap.parse_args()

    runs, page_bw = parse_page(os.path.join(a.shared, "golden", "bench", "llama-cpp-cpu.md"))
    tmp = tempfile.mkdtemp()
    probe = os.path.join(tmp, "membw")
    subprocess.run(["gcc", "-O3", "-march=native", "-ffast-math", "-fopenmp",
                    os.path.join(a.shared, "tools", "membw.c"), "-o", probe], check=True)

    print("| model | thr | loom pp64 | llama.cpp no-AMX pp64 | pp ratio | loom tg32 "
          "| llama.cpp tg32, faster build | tg ratio | BW here / there GB/s | tg ratio per GB/s "
          "| loom tg / (BW / weight bytes) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for run in a.runs:
        name, threads = (run.split(":") + ["2"])[:2]
        threads = int(threads)
        file = name + ".gguf"
        before = membw(probe, threads)
        ours = loom_bench(a.loom, os.path.join(a.models, file), threads, a.reps)
        bw = (before + membw(probe, threads)) / 2
        noamx, native = runs[("no-AMX", file, threads)], runs[("native", file, threads)]
        best_build, best = max((("no-AMX", noamx), ("native", native)), key=lambda b: b[1][1])
        there = page_bw[(best_build, threads)]
        per_bw = (ours["tg"] / bw) / (best[1] / there)
        bound = bw * 1e3 / noamx[2]
        print(f"| {name} | {threads} | {ours['pp']:.1f} | {noamx[0]:.1f} | {ours['pp'] / noamx[0]:.2f} "
              f"| {ours['tg']:.2f} | {best[1]:.2f} ({best_build}) | {ours['tg'] / best[1]:.2f} "
              f"| {bw:.1f} / {there:.1f} | {per_bw:.2f} | {ours['tg'] / bound:.0%} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
