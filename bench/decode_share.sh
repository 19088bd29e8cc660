#!/usr/bin/env bash
# decode_share.sh - the share of the memory's read bandwidth a loom decode
# reaches, markdown rows per model from loom-bench-decode-share
# (bench/decode_share.c): ROUNDS rounds, each a cache line's round trip
# between the threads, a plain reading of the memory (membw.c's loop), the
# step's own bytes read in its own pieces, 8 decode steps, and the plain
# reading again, a few milliseconds apart. A row for the rounds whose
# threads sat near each other (one die) and one for those far apart (two):
# the decode's share of the plain reading, and the pattern reading's.
#
#   bench/decode_share.sh BUILD THREADS ROUNDS MODEL...
set -euo pipefail
build=$1 threads=$2 rounds=$3
shift 3

echo "| model | MB a token reads | threads: placement, round trip | rounds | median t/s | median read GB/s | decode's share | pattern's share |"
echo "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"
for model in "$@"; do
	"$build/loom-bench-decode-share" -t "$threads" -r "$rounds" "$model" 2>/dev/null
done
