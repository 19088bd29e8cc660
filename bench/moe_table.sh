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
