#!/usr/bin/env bash
# loom_ab.sh - two loom builds side by side (a change against the commit
# before it), row by row in one sitting so that the machine's drift falls
# on both alike: for each model and test (pp64, pp512, tg32), `loom bench`
# of build A, then B, then A again; prints t/s of each and B over the mean
# of A's two runs (the spread of A's pair is the noise beside it).
#
#   bench/loom_ab.sh LOOM_A LOOM_B THREADS MODEL...
set -euo pipefail
a=$1 b=$2 threads=$3
shift 3

ts() { # loom, model, -p, -n
	"$1" bench -m "$2" -p "$3" -n "$4" -t "$threads" -r 3 -o json 2>/dev/null |
		/usr/bin/python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)[0]["avg_ts"])'
}

echo "| model | test | A t/s | B t/s | A again t/s | B / mean A | A's spread |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
for model in "$@"; do
	name=$(basename "$model" .gguf)
	for test in pp64 pp512 tg32; do
		if [ "$test" = tg32 ]; then p=0 n=32; else p=${test#pp} n=0; fi
		a1=$(ts "$a" "$model" "$p" "$n")
		b1=$(ts "$b" "$model" "$p" "$n")
		a2=$(ts "$a" "$model" "$p" "$n")
		/usr/bin/python3 -c "
a1, b1, a2 = $a1, $b1, $a2
m = (a1 + a2) / 2
print('| $name | $test | %.2f | %.2f | %.2f | %.3f | %.1f%% |' % (a1, b1, a2, b1 / m, abs(a1 - a2) / m * 100))"
	done
done
