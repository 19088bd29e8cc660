#!/usr/bin/env bash
# loom against Hugging Face transformers on the GPU machine, where PyTorch
# and transformers are installed (../shared/tools/device/README.md): the
# family models test_hf_synthetic writes as safetensors checkpoints, run by
# tests/reference/transformers_check.py through transformers and through
# loom's Python package. No GPU minute goes to building: `prepare` runs
# test_hf_synthetic here and copies its checkpoints and the CPU build of
# the library (plugins, contracts) into .hf-check/; prepare.sh's .gpu/
# comes along for the libraries the library loads.
#
#   bench/transformers_check.sh prepare   # here, after building build/ (Release)
#   bench/transformers_check.sh check     # there: carry [".gpu", ".hf-check"]
#
# The log goes to $OUT (else ./device-results).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-device-results}

# The families whose reference here is the numpy forward pass (qwen3moe,
# gemma3, gpt-oss, dots1, olmo3, smollm3) first, then those llama.cpp
# runs, each at one type (dense Granite left to granitemoe, whose block
# it is, and to llama.cpp); within the 64 MiB a device call carries.
cases="qwen3moe-f16 gemma3-f32 gemma3-f32-own-windows gpt-oss-f32-turned gpt-oss-mxfp4-f32 gpt-oss-mxfp4-yarn
	dots1-f16 olmo3-f32-yarn smollm3-f32 phi3-f32-longrope phi3-f32-longrope-grown phi3-f32-half-rotary
	mixtral-f32 qwen2moe-f32 olmoe-f32 granitemoe-bf16 olmo2-f32 cohere2-f16"

prepare() {
	[ -d .gpu ] || bash ../shared/tools/device/prepare.sh
	grep -qxF "/.hf-check/" .git/info/exclude 2>/dev/null || echo "/.hf-check/" >>.git/info/exclude
	build/tests/test_hf_synthetic >/dev/null
	rm -rf .hf-check
	mkdir -p .hf-check/lib/plugins .hf-check/hf
	cp -a build/libloom.so build/libloom.so.1 build/libloom.so.1.* .hf-check/lib/
	for p in cpu-generic cpu-avx2 cpu-avx512 safetensors; do cp build/plugins/loom-$p.so .hf-check/lib/plugins/; done
	cp -a arch .hf-check/lib/arch
	cat >.hf-check/lib/plugins.yaml <<-'EOF'
		search_path: [plugins]
		arch_path: [arch]
		backend: auto
		backends:
		  - name: cpu-avx512
		    file: loom-cpu-avx512.so
		  - name: cpu-avx2
		    file: loom-cpu-avx2.so
		  - name: cpu-generic
		    file: loom-cpu-generic.so
		formats:
		  - name: safetensors
		    file: loom-safetensors.so
	EOF
	for c in $cases; do cp -a "build/tmp/hf-$c" .hf-check/hf/; done
	du -sh .gpu .hf-check
	du -scb .gpu .hf-check $(git ls-files) | tail -1 |
		awk '{ printf "carried with the checkout: %.1f MiB of 64\n", $1 / 1048576; exit ($1 > 64 * 1048576) }'
}

check() {
	mkdir -p "$out"
	. .gpu/env.sh
	local python=python3
	[ -x /opt/torch/.venv/bin/python3 ] && python=/opt/torch/.venv/bin/python3
	"$python" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)' |
		tee "$out/transformers.log"
	LOOM_LIBRARY=$PWD/.hf-check/lib/libloom.so.1 LOOM_PLUGINS=$PWD/.hf-check/lib/plugins.yaml \
		PYTHONPATH=$PWD/bindings/python "$python" tests/reference/transformers_check.py .hf-check/hf/* 2>&1 |
		tee -a "$out/transformers.log"
}

case "${1:-}" in
prepare) prepare ;;
check) check ;;
*) echo "usage: $0 prepare|check" >&2; exit 2 ;;
esac
