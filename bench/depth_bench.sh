#!/usr/bin/env bash
# depth_bench.sh - decode speed as the context fills, loom against llama.cpp
# side by side, one after the other in one sitting:
#
#   bench/depth_bench.sh LOOM LLAMA_BIN_DIR MODEL [DEPTHS] [KV_TYPE] [THREADS]
#
# For each depth D (default "0 512 2048 3072"): `loom bench -p 0 -n 32 -d D`
# against `llama-batched-bench -npp D -ntg 32 -npl 1 -c 4096`, the latter
# with flash attention off and on, keeping the better (depth 0: a one-token
# prompt, the least it takes). KV_TYPE (f16, q8_0,
# q4_0) is the cache type of both; llama.cpp needs flash attention for a
# quantized V cache, so only that run counts there. Prints a markdown row
# per depth: loom t/s, llama.cpp t/s (and which -fa), the ratio.
set -euo pipefail
loom=$1 llama=$2 model=$3
depths=${4:-0 512 2048 3072}
kv=${5:-f16}
threads=${6:-2}

loom_tg() {
	"$loom" bench -m "$model" -p 0 -n 32 -d "$1" -t "$threads" -r 3 -c 4096 --kv-type "$kv" -o json 2>/dev/null |
		python3 -c 'import json,sys; r=[x for x in json.load(sys.stdin) if x["n_gen"]>0]; print("%.2f" % r[0]["avg_ts"])'
}

llama_tg() { # depth, fa (0/1)
	local fa=()
	[ "$2" = 1 ] && fa=(-fa)
	"$llama/llama-batched-bench" -m "$model" -c 4096 -b 2048 -ub 512 -npp "$(( $1 > 0 ? $1 : 1 ))" -ntg 32 -npl 1 -t "$threads" \
		-ctk "$kv" -ctv "$kv" "${fa[@]}" 2>/dev/null |
		awk -F'|' '/^\|[ ]+[0-9]+ \|/ {gsub(/ /, "", $9); print $9}' | tail -1
}

echo "| model | KV | cached tokens | loom tg t/s | llama.cpp tg t/s | loom / llama.cpp |"
echo "| --- | --- | ---: | ---: | ---: | ---: |"
for d in $depths; do
	l=$(loom_tg "$d")
	best="" which=""
	for fa in 0 1; do
		[ "$kv" != f16 ] && [ "$kv" != f32 ] && [ $fa = 0 ] && continue
		r=$(llama_tg "$d" $fa)
		[ -z "$r" ] && continue
		if [ -z "$best" ] || python3 -c "import sys; sys.exit(0 if $r > $best else 1)"; then best=$r which="fa $fa"; fi
	done
	ratio=$(python3 -c "print('%.2f' % ($l / $best))")
	echo "| $(basename "$model" .gguf) | $kv | $d | $l | $best ($which) | $ratio |"
done
