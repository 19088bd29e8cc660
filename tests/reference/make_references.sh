#!/bin/sh
# Remakes tests/reference/data/*.ref: each family model the tests write
# (support/family_models.c), run by what its entry names: llama.cpp through
# llama_reference.c, or numpy_reference.py (families llama.cpp lacks).
#
#     tests/reference/make_references.sh LLAMA_SRC LLAMA_BUILD COMMIT [LOOM_BUILD]
#
# LLAMA_SRC is a llama.cpp source tree (its include/ and ggml/include/),
# LLAMA_BUILD a build of it (bin/libllama.so), COMMIT the llama.cpp commit
# it is (recorded in each file), LOOM_BUILD loom's build directory
# (default: build). numpy_reference.py runs on /usr/bin/python3 with numpy.
set -eu
src=$1
lib=$2/bin
commit=$3
loom_build=${4:-build}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cc -O2 -std=c11 -I"$src/include" -I"$src/ggml/include" "$here/llama_reference.c" \
	-L"$lib" -Wl,-rpath,"$lib" -lllama -lggml -lggml-base -o "$work/llama_reference"
cmake --build "$loom_build" --target write_family_model >/dev/null
numpy=$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)')
mkdir -p "$here/data"
"$loom_build/tests/write_family_model" --list | while read -r name reference; do
	prompt=$("$loom_build/tests/write_family_model" "$name" "$work/$name.gguf")
	if [ "$reference" = numpy ]; then
		header="# numpy $numpy, float64, from Hugging Face's modeling code"
		run="/usr/bin/python3 $here/numpy_reference.py"
	else
		header="# llama.cpp $commit, CPU, one thread, F32 KV cache"
		run="$work/llama_reference"
	fi
	$run "$work/$name.gguf" "$name" "$work/$name.ref" $prompt 2>"$work/$name.log" ||
		{ cat "$work/$name.log"; exit 1; }
	{ echo "$header"; cat "$work/$name.ref"; } >"$here/data/$name.ref"
	echo "$name ($reference): $(wc -c <"$here/data/$name.ref") bytes"
done
