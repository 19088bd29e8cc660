#!/usr/bin/env bash
# decode_share.sh - the share of the memory's bandwidth a loom decode
# reaches, measured in pairs: each round reads membw's best pass, times
# `loom bench -p 0 -n 32` (3 repetitions), and reads membw again; the
# round's share is the bytes a token reads (side_by_side.sh's token_bytes)
# times the t/s, over the higher of its two readings. On a machine whose
# bandwidth drifts by tens of percent within minutes (other tenants), one
# reading set against one decode says as much about the minute as about
# loom; the median of many adjacent pairs says it about loom. Prints a
# markdown row per model: the median, least and greatest share, and the
# median t/s and bandwidth.
#
#   bench/decode_share.sh LOOM MEMBW THREADS ROUNDS MODEL...
set -euo pipefail
loom=$1 membw=$2 threads=$3 rounds=$4
shift 4

. "$(dirname "$0")/side_by_side.sh"

echo "| model | MB a token reads | rounds | median t/s | median membw GB/s | share of the bound: median (least-greatest) |"
echo "| --- | ---: | ---: | ---: | ---: | --- |"
for model in "$@"; do
	bytes=$(token_bytes "$model")
	pairs=""
	for _ in $(seq "$rounds"); do
		before=$(membw_gbs)
		ts=$(loom_ts "$model" 0 32)
		after=$(membw_gbs)
		pairs="$pairs $ts,$before,$after"
	done
	/usr/bin/python3 - "$(basename "$model" .gguf)" "$bytes" $pairs <<'EOF'
import statistics, sys
name, nbytes = sys.argv[1], int(sys.argv[2])
rounds = [tuple(map(float, p.split(","))) for p in sys.argv[3:]]
shares = [nbytes * ts / 1e9 / max(a, b) for ts, a, b in rounds]
print("| %s | %.1f | %d | %.2f | %.2f | %.0f%% (%.0f-%.0f%%) |" % (
    name, nbytes / 1e6, len(rounds), statistics.median(r[0] for r in rounds),
    statistics.median(max(r[1], r[2]) for r in rounds), 100 * statistics.median(shares),
    100 * min(shares), 100 * max(shares)))
EOF
done
