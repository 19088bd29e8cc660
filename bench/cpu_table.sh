#!/usr/bin/env bash
# cpu_table.sh - loom against llama.cpp on the CPU, side by side in one
# sitting: for each model, `loom bench` and `llama-bench` at pp64, pp512
# and tg32 with the same threads, and ../shared/tools/membw.c's read
# bandwidth measured just before and just after the two tg32 runs. Prints
# a markdown table: t/s of both, the ratio, and for tg32 the share of
# membw each reads the weights at (file size x t/s / membw). The machine's
# bandwidth drifts by tens of percent within minutes (other tenants), so
# the bound is the higher of the two readings beside the runs.
#
#   bench/cpu_table.sh LOOM LLAMA_BIN_DIR MEMBW THREADS MODEL...
#
# MEMBW: the membw binary (gcc -O2 -mavx512f -fopenmp membw.c). Run it on
# an otherwise idle machine: a third busy thread on two cores stalls both
# programs' barriers.
set -euo pipefail
loom=$1 llama=$2 membw=$3 threads=$4
shift 4

. "$(dirname "$0")/side_by_side.sh"

echo "| model | test | loom t/s | llama.cpp t/s | loom / llama.cpp | membw GB/s | loom, llama.cpp share of membw |"
echo "| --- | --- | ---: | ---: | ---: | ---: | --- |"
for model in "$@"; do
	name=$(basename "$model" .gguf)
	bytes=$(stat -c %s "$model")
	for test in pp64 pp512 tg32; do
		if [ "$test" = tg32 ]; then p=0 n=32; else p=${test#pp} n=0; fi
		bw="" share=""
		[ "$test" = tg32 ] && bw=$(membw_gbs)
		a=$(loom_ts "$model" "$p" "$n")
		b=$(llama_ts "$model" "$p" "$n")
		if [ "$test" = tg32 ]; then
			bw=$(/usr/bin/python3 -c "print(max($bw, $(membw_gbs)))")
			share=$(/usr/bin/python3 -c "print('%.0f%%, %.0f%%' % ($bytes * $a / 1e9 / $bw * 100, $bytes * $b / 1e9 / $bw * 100))")
		fi
		ratio=$(/usr/bin/python3 -c "print('%.2f' % ($a / $b))")
		echo "| $name | $test | $a | $b | $ratio | $bw | $share |"
	done
done
