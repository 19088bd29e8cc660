# side_by_side.sh - what cpu_table.sh and moe_table.sh share, sourced by
# both: membw's best read bandwidth, the t/s of
# `loom bench` and `llama-bench` on one model at -p and -n with the same
# threads and repetitions, and the bytes a decode step reads. They set
# loom, llama, membw and threads first.

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
