#!/usr/bin/env bash
# The cuda backend's checks on the GPU machine. The GPU minutes go to
# running, not building: `prepare` builds here (nvcc is here) for sm_90
# into an ignored folder, with the test binaries, and copies the reference
# data test_cuda reads, within the 64 MiB a device call carries
# (../shared/tools/device/README.md; prepare.sh's .gpu/ comes along for
# the libraries the binaries load):
#
#   bench/cuda_device_check.sh prepare   # here: .gpu/, .gpu-build/, .gpu-data/
#   bench/cuda_device_check.sh check [ops] [cuda] [serve] [memcheck]
#                                        # there: test_backend_ops, test_cuda, serve, compute-sanitizer
#                                        # (all four unless some are named: a rerun after a fix)
#   bench/cuda_device_check.sh bench [7b] [llama] [ncu]  # there: loom bench on tiny1b, pp/tg and batched
#                                                       # (the 7B shape; llama-bench; a decode's kernels
#                                                       # under ncu)
#
# carry: [".gpu", ".gpu-build", ".gpu-data"]. The binaries keep the paths
# they were built with (their rpath, the tests' source and build folders):
# `check` points those paths at the carried copies before it runs. Logs go
# to $OUT (else ./device-results); `check` takes 550 s at most (the sum
# of its steps' limits), so one device call of 600 s holds it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-device-results}
build=/tmp/loom-gpu-build

# The models test_cuda checks that fit beside the build (it skips the
# others, saying so), and the reference data of each.
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
		loom-cpu-avx2 loom-cpu-avx512 loom-cpu-amx loom-gguf loom-safetensors example-backend loom-bench-random-model \
		>/dev/null
	rm -rf .gpu-build .gpu-data
	mkdir -p .gpu-build/tests .gpu-data/models/synthetic .gpu-data/golden/synthetic
	cp -a $build/libloom.so* $build/loom $build/loom-bench-random-model $build/plugins $build/plugins.yaml \
		$build/test-plugins .gpu-build/
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
	# Each step runs whatever the ones before gave, under its own time limit,
	# and says how it ended: one call shows every failure at once.
	set +e
	mkdir -p "$out"
	place_build
	[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
	export LOOM_TEST_DATA=$PWD/.gpu-data
	step() { # name, limit in seconds, command...
		local name=$1 limit=$2
		shift 2
		local t0=$SECONDS
		timeout "$limit" "$@" >"$out/$name.log" 2>&1
		local rc=$?
		echo "== $name: exit $rc in $((SECONDS - t0)) s"
		tail -25 "$out/$name.log"
	}
	shift
	wanted=${*:-ops cuda serve memcheck}
	nvidia-smi -L | tee "$out/device.txt"
	$build/loom info --plugins | tee -a "$out/device.txt"
	# Every op case on cuda, held to loom's own backends' tiers; then the
	# rest of cuda: probe, device, golden models, the cache, the family
	# models against their reference files; then, a step of its own, each
	# node of real steps against cpu-generic's (the "nodes" tcase: the
	# first node past its band names the kernel, where a model's logits
	# part).
	[[ " $wanted " == *" ops "* ]] &&
		step test_backend_ops 120 bash -c "cd $build && ./tests/test_backend_ops --only cuda"
	[[ " $wanted " == *" cuda "* ]] && step test_cuda 180 bash -c "cd $build &&
		for c in probe device model kv families; do CK_RUN_CASE=\$c ./tests/test_cuda || rc=1; done; exit \${rc:-0}"
	[[ " $wanted " == *" cuda "* ]] && step test_cuda_nodes 60 env CK_RUN_CASE=nodes bash -c "cd $build && ./tests/test_cuda"
	[[ " $wanted " == *" serve "* ]] &&
		step serve 45 python3 bench/serve_same_text.py $build/loom "$LOOM_TEST_DATA/models/stories260K-f32.gguf" \
			cuda 8
	# memcheck over some op groups on cuda (one process each: CK_FORK=no)
	# and one model run.
	if [[ " $wanted " == *" memcheck "* ]]; then
		for g in matmul moe attention; do
			step "memcheck_$g" 35 env CK_FORK=no CK_RUN_CASE=$g compute-sanitizer --tool memcheck \
				--error-exitcode 9 $build/tests/test_backend_ops --only cuda
		done
		step memcheck_run 40 compute-sanitizer --tool memcheck --error-exitcode 9 $build/loom run --backend cuda \
			-m "$LOOM_TEST_DATA/models/stories260K-f32.gguf" -p "Once upon a time" -n 32 --temp 0
	fi
	;;
bench)
	# loom on the TinyLlama-shaped models (~1 minute to make), against
	# ../shared/golden/bench/llama-cpp-cuda.md's llama.cpp on an H100.
	# `bench 7b` adds the Llama-2-7B shape, written straight to GGUF by
	# loom-bench-random-model and quantized by loom (under a minute on 16
	# cores, where the numpy generator takes 5); `bench llama` also builds
	# the reference llama.cpp there (~4 minutes), quantizes the tiny1b
	# models with its llama-quantize and runs llama-bench beside each.
	mkdir -p "$out" /root/models
	place_build
	shift
	with_llama=0 with_ncu=0 shapes=tiny1b
	for a in "$@"; do
		case $a in
		llama) with_llama=1 ;;
		7b) shapes="tiny1b l7b" ;;
		ncu) with_ncu=1 ;;
		*) echo "bench: llama, 7b or ncu, not $a" >&2 && exit 2 ;;
		esac
	done
	if [ $with_llama = 1 ]; then
		bash .gpu/llama-cpp-cuda.sh >"$out/llama-build.log" 2>&1
		bash .gpu/models.sh 1b >/dev/null
	fi
	m=/root/models
	# The reference's tiny1b F16 bytes (its md5), and the 7B shape's own.
	[ -f $m/tiny1b-f16.gguf ] || python3 .gpu/gen_synthetic.py bench-1b $m/tiny1b-f16.gguf \
		--vocab-from .gpu/vocab-spm.gguf --seed 1234 --dtype f16
	if [[ $shapes == *l7b* ]] && [ ! -f $m/l7b-f16.gguf ]; then
		$build/loom-bench-random-model llama2-7b $m/l7b-f16.gguf
	fi
	for n in $shapes; do
		for t in q8_0 q4_0 q4_k_m; do
			[ -f $m/$n-$t.gguf ] || $build/loom quantize $m/$n-f16.gguf $m/$n-$t.gguf $t >/dev/null
		done
		for t in f16 q8_0 q4_0 q4_k_m; do
			$build/loom bench --backend cuda -m $m/$n-$t.gguf -p 512 -n 128 -r 5 -o md | tee -a "$out/bench.md"
			if [ $with_llama = 1 ] && [ $n = tiny1b ]; then
				/root/llama.cpp/build/bin/llama-bench -m $m/$n-$t.gguf -ngl 99 -fa 0 -p 512 -n 128 -r 5 |
					tee -a "$out/bench.md"
			fi
		done
		# Many sequences at once, as the page's llama-batched-bench rows.
		timeout 120 $build/loom bench --backend cuda -m $m/$n-q4_k_m.gguf -c 20000 -npl 1,4,16,64 -npp 128 -ntg 128 |
			tee -a "$out/bench.md"
	done
	# Each kernel of a decode step, under Nsight Compute (the clocks left
	# alone): its share of the step, its DRAM bytes and rate. The first
	# 600 launches (the load, the warm-up, the captures) are skipped; the
	# next 600 are a step and more of the replayed ones.
	if [ $with_ncu = 1 ]; then
		for n in $shapes; do
			for t in q4_k_m q8_0; do
				timeout 120 ncu --clock-control none --csv --print-units base --launch-skip 600 --launch-count 600 \
					--metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
					$build/loom bench --backend cuda -m $m/$n-$t.gguf -p 0 -n 32 -r 1 >"$out/ncu-$n-$t.csv" 2>&1
				python3 bench/ncu_summary.py "$out/ncu-$n-$t.csv" "$n $t, one-token decode" | tee -a "$out/ncu.md"
			done
		done
	fi
	;;
*)
	echo "usage: $0 prepare | check [ops] [cuda] [serve] [memcheck] | bench [7b] [llama] [ncu]" >&2
	exit 2
	;;
esac
