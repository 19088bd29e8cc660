#!/usr/bin/env bash
# The cuda backend's checks on the GPU machine. The GPU minutes go to
# running, not building: `prepare` builds here (nvcc is here) for sm_90
# into an ignored folder, with the test binaries, and copies the reference
# data test_cuda reads, within the 64 MiB a device call carries
# (../shared/tools/device/README.md; prepare.sh's .gpu/ comes along for
# the libraries the binaries load):
#
#   bench/cuda_device_check.sh prepare   # here: .gpu/, .gpu-build/, .gpu-data/
#   bench/cuda_device_check.sh check     # there: test_backend_ops, test_cuda, compute-sanitizer
#   bench/cuda_device_check.sh bench     # there: tiny1b models, loom bench beside llama-bench
#
# carry: [".gpu", ".gpu-build", ".gpu-data"]. The binaries keep the paths
# they were built with (their rpath, the tests' source and build folders):
# `check` points those paths at the carried copies before it runs. Logs go
# to $OUT (else ./device-results).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-device-results}
build=/tmp/loom-gpu-build

# The models test_cuda checks that fit beside the build (its tcases skip
# the others), and the reference data of each.
models="stories260K-f32.gguf stories260K-f16.gguf stories260K-q4_k_m.gguf stories260K-q5_k_m.gguf
	stories260K-q6_k.gguf stories260K-qwen2-f32.gguf stories260K-hf llama-2-tiny-random.gguf
	stories-llama-d256-f32.gguf stories-llama-d256-q8_0.gguf
	stories-llama-d256-q4_0.gguf stories-llama-d256-q4_k_m.gguf stories-llama-d256-q6_k.gguf
	synthetic/llama-q8_0.gguf synthetic/llama-q4_0.gguf synthetic/llama-q4_k_m.gguf synthetic/qwen2-q8_0.gguf
	synthetic/qwen3-q4_k_m.gguf"
golden="stories260K-f32 stories260K-f16 stories260K-q4_k_m stories260K-q5_k_m stories260K-q6_k stories260K-qwen2-f32
	llama-2-tiny-random stories-llama-d256-f32 stories-llama-d256-q8_0
	stories-llama-d256-q4_0 stories-llama-d256-q4_k_m stories-llama-d256-q6_k synthetic/llama-q8_0
	synthetic/llama-q4_0 synthetic/llama-q4_k_m synthetic/qwen2-q8_0 synthetic/qwen3-q4_k_m perplexity"

prepare() {
	local shared=../shared
	[ -d .gpu ] || bash $shared/tools/device/prepare.sh
	for d in .gpu-build .gpu-data; do
		grep -qxF "/$d/" .git/info/exclude 2>/dev/null || echo "/$d/" >>.git/info/exclude
	done
	cmake -S . -B $build -DCMAKE_BUILD_TYPE=Release -DLOOM_CUDA_ARCHITECTURES=90-real -DLOOM_TESTS_REQUIRED=ON \
		>/dev/null
	cmake --build $build -j"$(nproc)" --target loom-cli test_backend_ops test_cuda loom-cuda loom-cpu-generic \
		loom-cpu-avx2 loom-cpu-avx512 loom-cpu-amx loom-gguf loom-safetensors example-backend >/dev/null
	rm -rf .gpu-build .gpu-data
	mkdir -p .gpu-build/tests .gpu-data/models/synthetic .gpu-data/golden/synthetic
	cp -a $build/libloom.so* $build/loom $build/plugins $build/plugins.yaml $build/test-plugins .gpu-build/
	cp -a $build/tests/test_backend_ops $build/tests/test_cuda .gpu-build/tests/
	echo "$PWD" >.gpu-build/source-dir
	for m in $models; do cp -a "$shared/models/$m" ".gpu-data/models/$m"; done
	for g in $golden; do cp -a "$shared/golden/$g" ".gpu-data/golden/$g"; done
	cp -a $shared/golden/index.json .gpu-data/golden/
	du -sh .gpu .gpu-build .gpu-data
	du -scb .gpu .gpu-build .gpu-data $(git ls-files) | tail -1 |
		awk '{ printf "carried with the checkout: %.1f MiB of 64\n", $1 / 1048576; exit ($1 > 64 * 1048576) }'
}

# The carried build where it was built, and the source folder the tests
# name where it was: the paths its binaries hold.
place_build() {
	. .gpu/env.sh
	[ -d $build ] && [ ! -L $build ] && { echo "$build is a build folder of its own here: not replaced" >&2; exit 1; }
	ln -sfn "$PWD/.gpu-build" $build
	local src
	src=$(cat .gpu-build/source-dir)
	if [ "$src" != "$PWD" ]; then
		[ -e "$src" ] && [ ! -L "$src" ] && { echo "$src is a folder of its own here: not replaced" >&2; exit 1; }
		mkdir -p "$(dirname "$src")"
		ln -sfn "$PWD" "$src"
	fi
	ln -sfn "$src/arch" $build/arch
	mkdir -p $build/tmp
}

case ${1:-} in
prepare)
	prepare
	;;
check)
	mkdir -p "$out"
	place_build
	export LOOM_TEST_DATA=$PWD/.gpu-data
	nvidia-smi -L | tee "$out/device.txt"
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
	mkdir -p "$out"
	place_build
	bash .gpu/llama-cpp-cuda.sh >"$out/llama-build.log" 2>&1
	bash .gpu/models.sh 1b >/dev/null
	for t in f16 q8_0 q4_0 q4_k_m; do
		m=/root/models/tiny1b-$t.gguf
		$build/loom bench --backend cuda -m $m -p 512 -n 128 -r 5 -o md | tee -a "$out/bench.md"
		/root/llama.cpp/build/bin/llama-bench -m $m -ngl 99 -fa 0 -p 512 -n 128 -r 5 | tee -a "$out/bench.md"
	done
	;;
*)
	echo "usage: $0 prepare | check | bench" >&2
	exit 2
	;;
esac
