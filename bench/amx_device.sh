#!/usr/bin/env bash
# amx_device.sh - cpu-amx on the GPU machine's CPU (an Intel Xeon with AMX):
# the op and golden tests, then the CPU table against llama.cpp's native and
# noamx builds, in one call of the device tool.
#
#   bench/amx_device.sh prepare   # here: fills .gpu/ (../shared/tools/device/prepare.sh),
#                                 # adds membw.c and a 64 MiB-sized subset of the test data
#   bench/amx_device.sh run       # there, from the checkout, with .gpu carried: prints the
#                                 # tests' failures and the tables; $OUT gets tests.log and both tables
#
# The machine is offline and short-lived, so everything is built in the same
# call. The eight benchmark models run at once, each on two cores of its own
# (taskset), loom and llama.cpp one after the other on those cores
# (bench/cpu_table.sh).
set -u
here=$(cd "$(dirname "$0")" && pwd)
case ${1:-} in
prepare)
	shared=${LOOM_TEST_DATA:-$here/../../shared}
	bash "$shared/tools/device/prepare.sh"
	cp "$shared/tools/membw.c" .gpu/
	rm -rf .gpu/data && mkdir -p .gpu/data/models/synthetic .gpu/data/golden/synthetic
	cp "$shared/golden/README.md" "$shared/golden/index.json" .gpu/data/golden/
	for m in llama-2-tiny-random stories-llama-d256-{f16,q4_0,q4_k_m,q5_k_m,q6_k,q8_0} \
		stories260K-{f16,q4_k_m,q5_k_m,q6_k} \
		synthetic/llama-{q2_k,q3_k,q4_0,q4_1,q4_k_m,q5_0,q5_1,q8_0} \
		synthetic/{qwen3-q4_k_m,gemma-q4_k_m,qwen2-q8_0,phi2-q8_0}; do
		cp "$shared/models/$m.gguf" .gpu/data/models/$m.gguf
		cp -r "$shared/golden/$m" .gpu/data/golden/$m
	done
	du -sh .gpu
	;;
run)
	R=$(pwd) O=${OUT:-/tmp/out} T0=$(date +%s)
	mkdir -p "$O"
	log() { echo "== $(($(date +%s) - T0))s $*"; }
	. .gpu/env.sh > /dev/null 2>&1
	# libmicrohttpd.pc names gnutls, whose .pc the image lacks (the library is there)
	mkdir -p /root/pc && printf 'Name: gnutls\nDescription: stub\nVersion: 3.8.3\nLibs:\nCflags:\n' > /root/pc/gnutls.pc
	export PKG_CONFIG_PATH=/root/pc:$PKG_CONFIG_PATH
	lscpu | grep -E "Model name"
	mkdir -p /root/ref /root/models && tar -xJf .gpu/llama.cpp-c392e50.tar.xz -C /root/ref
	for b in native noamx; do
		(flags=""; [ $b = noamx ] && flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
		 cmake -S /root/ref/llama.cpp -B /root/ref/$b -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
			-DLLAMA_BUILD_TESTS=OFF -DGGML_CUDA=OFF -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" > /root/ref/$b.cfg.log 2>&1
		 cmake --build /root/ref/$b -j5 --target llama-bench llama-quantize > /root/ref/$b.build.log 2>&1) &
	done
	(for p in "bench-small small" "bench-1b tiny1b"; do
		set -- $p
		python3 .gpu/gen_synthetic.py $1 /root/models/$2-f16.gguf --vocab-from .gpu/vocab-spm.gguf --seed 1234 \
			--dtype f16 >> /root/models/gen.log 2>&1
	done) &
	# loom's CPU plugins only: the cuda one is not what this measures
	nocuda=$(echo "$PATH" | tr ':' '\n' | grep -v cuda | paste -sd:)
	PATH=$nocuda CUDACXX= cmake -S . -B /root/build -DCMAKE_BUILD_TYPE=Release -DLOOM_WERROR=ON > /root/build.cfg.log 2>&1
	cmake --build /root/build -j6 > /root/build.log 2>&1
	[ -x /root/build/loom ] || { tail -20 /root/build.cfg.log; tail -30 /root/build.log; exit 1; }
	log "loom built"
	gcc -O2 -mavx512f -fopenmp .gpu/membw.c -o /root/membw
	(cd /root/build && LOOM_TEST_DATA=$R/.gpu/data timeout 240 ctest -j3 -R "cpu_ops|golden" --output-on-failure > $O/tests.log 2>&1)
	log "tests (the golden models left out of .gpu/data fail as missing)"
	grep -E "tests passed|Checks" $O/tests.log
	grep -E ":F:|:E:" $O/tests.log | grep -v "No such file" | head -20
	wait
	[ -x /root/ref/native/bin/llama-bench ] || { tail -20 /root/ref/native.build.log; exit 1; }
	for n in small tiny1b; do
		for t in q8_0 q4_0 q4_k_m; do
			/root/ref/native/bin/llama-quantize /root/models/$n-f16.gguf /root/models/$n-$t.gguf $t > /dev/null 2>&1 &
		done
	done
	wait
	log "models"
	sed 's#/usr/bin/python3#python3#g' "$here/cpu_table.sh" > /root/cpu_table.sh
	models="small-q8_0 small-q4_0 small-q4_k_m small-f16 tiny1b-q8_0 tiny1b-q4_0 tiny1b-q4_k_m tiny1b-f16"
	for build in native noamx; do
		i=0
		for m in $models; do
			taskset -c $((2 * i)),$((2 * i + 1)) bash /root/cpu_table.sh /root/build/loom /root/ref/$build/bin \
				/root/membw 2 /root/models/$m.gguf > $O/$build-$m.md 2>&1 &
			i=$((i + 1))
		done
		wait
		log "against llama.cpp's $build build"
		for m in $models; do tail -n +3 $O/$build-$m.md; done > $O/$build.md
		rm $O/$build-*.md
		cat $O/$build.md
	done
	;;
*)
	echo "usage: bench/amx_device.sh prepare|run" >&2
	exit 2
	;;
esac
