#!/usr/bin/env bash
# loom_sampler_sample beside llama.cpp's sampler chain, on the same random
# logits (bench/sampler_logits.h), in one sitting: the mean time of a token
# per mode and vocabulary, and llama.cpp's over loom's. Run from the
# repository root after building (BUILD, default build/); the reference
# llama.cpp is built by ../shared/tools/llama-cpp-cpu.sh into LLAMA_REF
# (default ~/llama.cpp-ref).
#   bench/sampler_table.sh [DRAWS] [VOCAB...]
set -euo pipefail
build=${BUILD:-build}
ref=${LLAMA_REF:-$HOME/llama.cpp-ref}
draws=${1:-2000}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(32000 49152 128256 151936 262144)

[ -x "$ref/native/bin/llama-server" ] || bash ../shared/tools/llama-cpp-cpu.sh "$ref" >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
gcc -O2 -std=gnu11 bench/sampler_llamacpp.c -o "$out/sampler-llamacpp" \
	-I"$ref/llama.cpp/include" -I"$ref/llama.cpp/ggml/include" \
	-L"$ref/native/bin" -lllama -Wl,-rpath,"$ref/native/bin" -lm

"$build/loom-bench-sampler" -r "$draws" "${sizes[@]}" > "$out/loom.tsv"
"$out/sampler-llamacpp" -r "$draws" "${sizes[@]}" > "$out/llama.tsv"

echo "| vocabulary | mode | loom ms/token | llama.cpp ms/token | llama.cpp / loom |"
echo "| ---: | --- | ---: | ---: | ---: |"
paste "$out/loom.tsv" "$out/llama.tsv" | awk -F'\t' '{
	printf "| %d | %s | %.4f | %.4f | %.1fx |\n", $2, $3, $4, $8, $8 / $4 }'
