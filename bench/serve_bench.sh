#!/usr/bin/env bash
# loom serve against llama-server, side by side in one sitting, the way
# ../shared/golden/bench/llama-server.md measures llama-server: for each
# model, each server is started with -t 2 -np 16 -c 4096, pre-warmed by 16
# clients for 12 s, then ../shared/tools/serve_load.py runs 1, 4 and 16
# streaming clients and 4 non-streaming ones, REPS times. Then one client,
# twice, against a fresh server with -np 1, and bench/serve_gap.py twice
# (a stream's largest gap while a 2,000-token prompt arrives; -np 2 -c 8192,
# as llama-server splits -c among its slots). Then the sampling rows: 16
# streaming clients, REPS times, as clients sample: greedy, OpenAI's
# defaults (temperature 1 and nothing else: llama-server adds its own
# top-k 40, top-p 0.95 and min-p 0.05, loom serve keeps OpenAI's meaning),
# and temperature 0.8 with top-p 0.95. Raw JSON goes to OUT;
# bench/serve_table.py turns it into bench/RESULTS.md's tables.
#
# usage: bench/serve_bench.sh [-s] MODELS_DIR LLAMA_BIN_DIR OUT [REPS] [MODEL...]
#   -s: the sampling rows alone
#   MODELS_DIR: MODEL.gguf for each MODEL (default small-q4_0 small-q8_0, from
#     bench/make_models.sh; bench/make_shapes.sh makes the real-vocabulary ones)
#   LLAMA_BIN_DIR: llama-server from ../shared/tools/llama-cpp-cpu.sh
set -euo pipefail
sampling_only=0
if [ "${1:-}" = -s ]; then
	sampling_only=1
	shift
fi
models=${1:?usage: serve_bench.sh [-s] MODELS_DIR LLAMA_BIN_DIR OUT [REPS] [MODEL...]}
llama=${2:?}
out=${3:?}
reps=${4:-3}
shift 3
[ $# -gt 0 ] && shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(small-q4_0 small-q8_0)
here=$(cd "$(dirname "$0")/.." && pwd)
shared=${LOOM_TEST_DATA:-$here/../shared}
load="/usr/bin/python3 $shared/tools/serve_load.py"
gap="/usr/bin/python3 $here/bench/serve_gap.py"
loom=${LOOM:-$here/build/loom}
port=18555
mkdir -p "$out"

start() { # server model np [ctx]
	local ctx=${4:-4096}
	if [ "$1" = loom ]; then
		"$loom" serve -m "$models/$2.gguf" --host 127.0.0.1 --port $port -t 2 -np "$3" -c "$ctx" \
			>"$out/$1-$2-np$3.log" 2>&1 &
	else
		"$llama/llama-server" -m "$models/$2.gguf" --host 127.0.0.1 --port $port -t 2 -np "$3" -c "$ctx" \
			--metrics >"$out/$1-$2-np$3.log" 2>&1 &
	fi
	pid=$!
	for _ in $(seq 120); do
		curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	echo "server $1 did not start" >&2
	exit 1
}
stop() { kill "$pid"; wait "$pid" || true; }

for model in "${names[@]}"; do
	for server in loom llama; do
		start $server $model 16
		$load --port $port --clients 16 --warmup 0 --window 12 >/dev/null
		if [ $sampling_only = 0 ]; then
			for rep in $(seq "$reps"); do
				$load --port $port --clients 1,4,16 --seed "$rep" --json "$out/$server-$model-stream-$rep.json"
				$load --port $port --clients 4 --no-stream --seed "$rep" --json "$out/$server-$model-nostream-$rep.json"
			done
		fi
		# name, then serve_load.py's sampling options
		for mode in "greedy" "t1 --temperature 1" "t0.8-p0.95 --temperature 0.8 --top-p 0.95"; do
			set -- $mode
			name=$1
			shift
			for rep in $(seq "$reps"); do
				$load --port $port --clients 16 --seed "$rep" "$@" --json "$out/$server-$model-sample-$name-$rep.json"
			done
		done
		stop
		[ $sampling_only = 1 ] && continue
		start $server $model 1
		for rep in 1 2; do
			$load --port $port --clients 1 --seed "$rep" --json "$out/$server-$model-np1-$rep.json"
		done
		stop
		# Two slots of 4,096 cells: llama-server gives each slot -c / -np
		# cells and would cut a 2,000-token prompt at -np 16 -c 4096.
		start $server $model 2 8192
		for rep in 1 2; do
			$gap --port $port --json "$out/$server-$model-gap-$rep.json"
		done
		stop
	done
done
