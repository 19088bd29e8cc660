# side_by_side.sh - what cpu_table.sh and moe_table.sh share, sourced by
# both: membw's best read bandwidth, and the t/s of `loom bench` and
# `llama-bench` on one model at -p and -n with the same threads and
# repetitions. They set loom, llama, membw and threads first.

membw_gbs() {
	"$membw" 2>&1 | sed -n 's/.*best \([0-9.]*\) GB\/s.*/\1/p' | tail -1
}

loom_ts() { # model, -p, -n
	"$loom" bench -m "$1" -p "$2" -n "$3" -t "$threads" -r 3 -o json 2>/dev/null |
		/usr/bin/python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)[0]["avg_ts"])'
}

llama_ts() { # model, -p, -n
	"$llama/llama-bench" -m "$1" -p "$2" -n "$3" -t "$threads" -r 3 -o json 2>/dev/null |
		/usr/bin/python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)[0]["avg_ts"])'
}
