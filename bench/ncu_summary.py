#!/usr/bin/env python3
"""ncu_summary.py - Nsight Compute's per-launch counters of a decode, summed
per kernel: what each kernel took of the profiled time, the bytes it read
from DRAM and at what rate, and its mean DRAM throughput as a share of the
card's peak: the profiler line beside a benchmark row that falls short.

    ncu --clock-control none --csv --print-units base \\
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \\
        PROGRAM ... > launches.csv
    ncu_summary.py launches.csv [TITLE]

Prints a markdown table, the kernels by time, largest first."""
import csv
import sys
from collections import defaultdict

TIME = "gpu__time_duration.sum"
BYTES = "dram__bytes_read.sum"
SHARE = "dram__throughput.avg.pct_of_peak_sustained_elapsed"


def number(text):
    return float(text.replace(",", ""))


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: ncu_summary.py LAUNCHES.csv [TITLE]")
    with open(sys.argv[1], newline="") as f:
        # ncu prints its own lines (==PROF== ...) before the table.
        lines = [line for line in f if line.startswith('"')]
    launches = defaultdict(dict)
    names = {}
    for row in csv.DictReader(lines):
        launch = row["ID"]
        names[launch] = row["Kernel Name"].split("(")[0]
        launches[launch][row["Metric Name"]] = number(row["Metric Value"])
    kernels = defaultdict(lambda: {"n": 0, "ns": 0.0, "bytes": 0.0, "share": 0.0})
    for launch, metrics in launches.items():
        k = kernels[names[launch]]
        k["n"] += 1
        k["ns"] += metrics.get(TIME, 0.0)
        k["bytes"] += metrics.get(BYTES, 0.0)
        k["share"] += metrics.get(SHARE, 0.0)
    total = sum(k["ns"] for k in kernels.values()) or 1.0
    if len(sys.argv) > 2:
        print(f"\n{sys.argv[2]}\n")
    print("| kernel | launches | share of time | us a launch | MB read a launch | GB/s | DRAM % of peak |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, k in sorted(kernels.items(), key=lambda item: -item[1]["ns"]):
        rate = k["bytes"] / k["ns"] if k["ns"] > 0 else 0.0
        print(f"| {name} | {k['n']} | {100 * k['ns'] / total:.1f}% | {k['ns'] / k['n'] / 1e3:.2f} | "
              f"{k['bytes'] / k['n'] / 1e6:.3f} | {rate:.0f} | {k['share'] / k['n']:.1f} |")


if __name__ == "__main__":
    main()
