#!/usr/bin/env bash
# The benchmark models with the shapes and vocabularies people run
# (bench/make_shapes.py: SmolLM2-360M, Qwen2.5-0.5B, Llama-3.2-1B,
# Gemma-2-2B's shape as today's gemma contract runs it, Qwen2.5-3B), each
# quantized by `loom quantize` to q8_0 and q4_k_m (llama-quantize's types
# per tensor) as DIR/SHAPE-q8_0.gguf and DIR/SHAPE-q4_k_m.gguf. The F16
# source of each is deleted once both are written, so DIR needs ~6 GB free
# beyond the ~12 GB the ten files take.
#
# usage: bench/make_shapes.sh DIR [SHAPE...]   (LOOM: the loom binary, default build/loom)
set -euo pipefail
dir=${1:?usage: bench/make_shapes.sh DIR [SHAPE...]}
shift
here=$(cd "$(dirname "$0")/.." && pwd)
loom=${LOOM:-$here/build/loom}
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=(smollm2-360m qwen2.5-0.5b llama3.2-1b gemma2-2b qwen2.5-3b)
mkdir -p "$dir"
for shape in "${shapes[@]}"; do
	if [ -f "$dir/$shape-q8_0.gguf" ] && [ -f "$dir/$shape-q4_k_m.gguf" ]; then
		continue
	fi
	/usr/bin/python3 "$here/bench/make_shapes.py" "$dir" "$shape"
	for scheme in q8_0 q4_k_m; do
		out="$dir/$shape-$scheme.gguf"
		[ -f "$out" ] || "$loom" quantize "$dir/$shape-f16.gguf" "$out" "$scheme"
	done
	rm -f "$dir/$shape-f16.gguf"
done
ls -l "$dir"
