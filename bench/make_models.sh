#!/usr/bin/env bash
# Regenerates the llama.cpp comparison models of
# ../shared/golden/bench/llama-cpp-cpu.md (bench-small: stories110M's shape,
# tiny1b: TinyLlama-1.1B's) with ../shared/tools/gen_synthetic.py, and checks
# their md5 against that page. They are too big for the repository or
# ../shared: give a directory with ~3 GB free.
#
# usage: bench/make_models.sh DIR
set -euo pipefail
dir=${1:?usage: bench/make_models.sh DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
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
