#!/usr/bin/env bash
# moe_table.sh - mixture-of-experts models, loom against llama.cpp on the
# CPU in one sitting: `loom bench` and `llama-bench` at pp64, pp512 and
# tg32 with the same threads, as cpu_table.sh, but a decode's bound counts
# the bytes a token actually reads: every tensor but the token embedding
# (one row of it, unless it is the tied output head, which reads it all),
# and of each layer's experts only the n_expert_used of n_expert a token
# goes to. membw's read bandwidth is measured just before
# and after the tg32 runs; the bound is the higher reading.
#
#   bench/moe_table.sh LOOM LLAMA_BIN_DIR MEMBW THREADS MODEL...
set -euo pipefail
loom=$1 llama=$2 membw=$3 threads=$4
shift 4

. "$(dirname "$0")/side_by_side.sh"

# Bytes a decode step reads, from `loom info`'s tensor table and the
# expert counts in its metadata. The token embedding counts whole where
# it is also the output head (no output.weight: a tied head reads every
# row each step), else as the one row a token reads.
token_bytes() {
	"$loom" info "$1" | /usr/bin/python3 -c '
import re, sys
used = count = None
sizes = {}
lines = sys.stdin.read().splitlines()
for l in lines:
    m = re.match(r"\s+\S+\.expert_used_count\s+(\d+)", l)
    used = int(m.group(1)) if m else used
    m = re.match(r"\s+\S+\.expert_count\s+(\d+)", l)
    count = int(m.group(1)) if m else count
    m = re.match(r"\s+(\S+)\s+\S+\s+\[.*\]\s+(\d+)\s+\d+$", l)
    if m:
        sizes[m.group(1)] = int(m.group(2))
total = 0.0
for name, size in sizes.items():
    if name == "token_embd.weight" and "output.weight" in sizes:
        continue
    total += size * (used / count if "_exps." in name else 1)
print(int(total))'
}

echo "| model | test | loom t/s | llama.cpp t/s | loom / llama.cpp | MB a token reads | membw GB/s | loom, llama.cpp share of the bound |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"
for model in "$@"; do
	name=$(basename "$model" .gguf)
	bytes=$(token_bytes "$model")
	for test in pp64 pp512 tg32; do
		if [ "$test" = tg32 ]; then p=0 n=32; else p=${test#pp} n=0; fi
		bw="" share="" mb=""
		[ "$test" = tg32 ] && bw=$(membw_gbs)
		a=$(loom_ts "$model" "$p" "$n")
		b=$(llama_ts "$model" "$p" "$n")
		if [ "$test" = tg32 ]; then
			bw=$(/usr/bin/python3 -c "print(max($bw, $(membw_gbs)))")
			mb=$(/usr/bin/python3 -c "print('%.1f' % ($bytes / 1e6))")
			share=$(/usr/bin/python3 -c "print('%.0f%%, %.0f%%' % ($bytes * $a / 1e9 / $bw * 100, $bytes * $b / 1e9 / $bw * 100))")
		fi
		ratio=$(/usr/bin/python3 -c "print('%.2f' % ($a / $b))")
		echo "| $name | $test | $a | $b | $ratio | $mb | $bw | $share |"
	done
done
