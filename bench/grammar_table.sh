#!/usr/bin/env bash
# loom's grammar following beside llama.cpp's grammar sampler, on the same
# schemas, instances and vocabularies, in one sitting: loom-bench-grammar
# (bench/grammar.c) writes its workload (the JSON-Schema-Test-Suite's
# schemas loom compiles, agent-shaped ones, the valid instances loom takes)
# and times it; bench/grammar_llamacpp.cpp, built against the reference
# llama.cpp (../shared/tools/llama-cpp-cpu.sh into LLAMA_REF, default
# ~/llama.cpp-ref), times llama.cpp's json_schema_to_grammar +
# llama_sampler_init_grammar on the same workload. Run from the repository
# root after building (BUILD, default build/).
#   bench/grammar_table.sh MODEL...
set -euo pipefail
build=${BUILD:-build}
ref=${LLAMA_REF:-$HOME/llama.cpp-ref}
suite=${SUITE:-/usr/share/json-schema-test-suite/tests/draft7}
[ $# -gt 0 ] || { echo "usage: $0 MODEL..." >&2; exit 2; }
[ -f "$ref/native/common/libcommon.a" ] || bash ../shared/tools/llama-cpp-cpu.sh "$ref" >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
g++ -O2 -std=c++17 bench/grammar_llamacpp.cpp -o "$out/grammar-llamacpp" \
	-I"$ref/llama.cpp/include" -I"$ref/llama.cpp/common" -I"$ref/llama.cpp/ggml/include" -I"$ref/llama.cpp/vendor" \
	"$ref/native/common/libcommon.a" -L"$ref/native/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$ref/native/bin" \
	-lpthread
echo "== loom =="
"$build/loom-bench-grammar" --dump "$out/workload.jsonl" "$build/plugins.yaml" "$suite" "$@"
echo "== llama.cpp =="
"$out/grammar-llamacpp" "$out/workload.jsonl" "$@"
