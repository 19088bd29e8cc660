#!/usr/bin/env bash
# Regenerates the llama.cpp comparison models of
# ../shared/golden/bench/llama-cpp-cpu.md (bench-small: stories110M's shape,
# tiny1b: TinyLlama-1.1B's) with ../shared/tools/gen_synthetic.py, checks
# their md5 against that page, and quantizes them with `loom quantize` to
# q8_0, q4_0 and q4_k_m (the same types per tensor, and the same sizes, as
# llama-quantize's files there). They are too big for the repository or
# ../shared: give a directory with ~6 GB free.
#
# usage: bench/make_models.sh DIR [LOOM]   (LOOM: the loom binary, build/loom)
set -euo pipefail
dir=${1:?usage: bench/make_models.sh DIR [LOOM]}
here=$(cd "$(dirname "$0")/.." && pwd)
loom=${2:-$here/build/loom}
shared=${LOOM_TEST_DATA:-$here/../shared}
python=/usr/bin/python3
vocab=$shared/models/synthetic/llama-f32.gguf
mkdir -p "$dir"

make_one() { # preset file dtype md5
	if [ ! -f "$dir/$2" ]; then
		"$python" "$shared/tools/gen_synthetic.py" "$1" "$dir/$2" --vocab-from "$vocab" --seed 1234 --dtype "$3"
	fi
	echo "$4  $dir/$2" | md5sum -c -
}
make_one bench-small small-f32.gguf f32 198f840d94df61fcf4258cb24b569a40
make_one bench-1b tiny1b-f16.gguf f16 ca6d947ae0d4b263c8c134590fc375e5
for base in small-f32 tiny1b-f16; do
	for scheme in q8_0 q4_0 q4_k_m; do
		out="$dir/${base%-*}-$scheme.gguf"
		[ -f "$out" ] || "$loom" quantize "$dir/$base.gguf" "$out" "$scheme"
	done
done
