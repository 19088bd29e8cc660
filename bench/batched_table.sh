#!/usr/bin/env bash
# batched_table.sh - several sequences decoded together, loom against
# llama.cpp side by side in one sitting: `loom bench -npl` and
# `llama-batched-bench` with the same prompt and generation lengths,
# sequence counts and threads. Each side runs twice and keeps, per
# sequence count, the run with the better generation rate: loom the same
# way twice, llama.cpp with -fa off and with -fa on. (A single run is at
# the mercy of this VM's memory bandwidth, which drifts by tens of
# percent.) Prints a markdown table of prompt and generation tokens/s of
# both and the ratios.
#
#   bench/batched_table.sh LOOM LLAMA_BIN_DIR THREADS PP TG NPL MODEL...
#
# NPL: comma-separated sequence counts, as both programs take them.
set -euo pipefail
loom=$1 llama=$2 threads=$3 pp=$4 tg=$5 npl=$6
shift 6

# "pl speed_pp speed_tg" per line.
loom_rows() {
	"$loom" bench -m "$1" -npp "$pp" -ntg "$tg" -npl "$npl" -t "$threads" -o json 2>/dev/null |
		/usr/bin/python3 -c 'import json,sys
for r in json.load(sys.stdin): print(r["pl"], "%.2f" % r["speed_pp"], "%.2f" % r["speed_tg"])'
}

llama_rows() { # model, -fa flag or nothing
	local ctx=$(/usr/bin/python3 -c "print(max(int(b) for b in '$npl'.split(',')) * ($pp + $tg) + 64)")
	"$llama/llama-batched-bench" -m "$1" -npp "$pp" -ntg "$tg" -npl "$npl" -t "$threads" -c "$ctx" \
		-b 2048 -ub 512 ${2:-} --output-format jsonl 2>/dev/null |
		/usr/bin/python3 -c 'import json,sys
for line in sys.stdin:
    line = line.strip()
    if line.startswith("{") and "\"pl\"" in line:
        r = json.loads(line); print(r["pl"], "%.2f" % r["speed_pp"], "%.2f" % r["speed_tg"])'
}

# Per sequence count, the row of the two runs with the higher S_TG.
best_of() {
	join <(echo "$1" | sort -k1,1) <(echo "$2" | sort -k1,1) | sort -n -k1,1 |
		awk '{ if ($3 >= $5) print $1, $2, $3; else print $1, $4, $5 }'
}

echo "| model | PP | TG | B | loom S_PP t/s | llama.cpp S_PP t/s | loom S_TG t/s | llama.cpp S_TG t/s (fa) | S_TG loom / llama.cpp |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for model in "$@"; do
	name=$(basename "$model" .gguf)
	ours=$(best_of "$(loom_rows "$model")" "$(loom_rows "$model")")
	off=$(llama_rows "$model")
	on=$(llama_rows "$model" -fa)
	while read -r pl l_pp l_tg; do
		read -r _ o_pp o_tg < <(echo "$off" | awk -v b="$pl" '$1 == b')
		read -r _ n_pp n_tg < <(echo "$on" | awk -v b="$pl" '$1 == b')
		best=$(/usr/bin/python3 -c "print('%s %s %s' % (('$o_pp', '$o_tg', 'off') if $o_tg >= $n_tg else ('$n_pp', '$n_tg', 'on')))")
		read -r b_pp b_tg fa <<<"$best"
		ratio=$(/usr/bin/python3 -c "print('%.2f' % ($l_tg / $b_tg))")
		echo "| $name | $pp | $tg | $pl | $l_pp | $b_pp | $l_tg | $b_tg ($fa) | $ratio |"
	done <<<"$ours"
done
