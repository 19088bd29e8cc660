#!/usr/bin/env bash
# The cuda backend's checks on the GPU machine, in two calls that each fit one
# device command (../shared/tools/device/README.md; run prepare.sh here first
# and carry .gpu, plus a copy of ../shared's golden/ and the models it names
# in an ignored folder, e.g. .gpu-data, as the working tree may not exceed
# 64 MiB):
#
#   bench/cuda_device_check.sh check DATA   # build, test_backend_ops, test_cuda, compute-sanitizer
#   bench/cuda_device_check.sh bench        # tiny1b models: loom bench beside llama-bench
#
# DATA holds golden/ and models/ as ../shared does (test_cuda's model tcase
# skips the models it lacks). Logs go to $OUT (else ./device-results).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-device-results}
mkdir -p "$out"
. .gpu/env.sh
build=/root/build

build_loom() {
	cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DLOOM_CUDA_ARCHITECTURES=90-real >"$out/configure.log"
	cmake --build $build -j"$(nproc)" >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
}

case ${1:-} in
check)
	export LOOM_TEST_DATA=$(cd "${2:?the reference data folder}" && pwd)
	nvidia-smi -L | tee "$out/device.txt"
	build_loom
	$build/loom info --plugins | tee -a "$out/device.txt"
	# Every op case on every backend, cuda among them, then the rest of cuda.
	(cd $build && ./tests/test_backend_ops) 2>&1 | tee "$out/test_backend_ops.log" | tail -30
	(cd $build && ./tests/test_cuda) 2>&1 | tee "$out/test_cuda.log" | tail -30
	# memcheck over the op cases on cuda alone (one process: CK_FORK=no) and
	# one model run.
	CK_FORK=no compute-sanitizer --tool memcheck --error-exitcode 9 $build/tests/test_backend_ops \
		$build/plugins/loom-cuda.so >"$out/memcheck_ops.log" 2>&1 &&
		echo "memcheck ops: clean" || tail -40 "$out/memcheck_ops.log"
	compute-sanitizer --tool memcheck --error-exitcode 9 $build/loom run --backend cuda \
		-m "$LOOM_TEST_DATA/models/stories260K-f32.gguf" -p "Once upon a time" -n 32 --temp 0 \
		>"$out/memcheck_run.log" 2>&1 && echo "memcheck run: clean" || tail -40 "$out/memcheck_run.log"
	;;
bench)
	build_loom
	bash .gpu/llama-cpp-cuda.sh >"$out/llama-build.log" 2>&1
	bash .gpu/models.sh 1b >/dev/null
	for t in f16 q8_0 q4_0 q4_k_m; do
		m=/root/models/tiny1b-$t.gguf
		$build/loom bench --backend cuda -m $m -p 512 -n 128 -r 5 -o md | tee -a "$out/bench.md"
		/root/llama.cpp/build/bin/llama-bench -m $m -ngl 99 -fa 0 -p 512 -n 128 -r 5 | tee -a "$out/bench.md"
	done
	;;
*)
	echo "usage: $0 check DATA | bench" >&2
	exit 2
	;;
esac
