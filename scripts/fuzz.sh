#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang - AddressSanitizer
# and UndefinedBehaviorSanitizer, float-cast-overflow included - in
# build-fuzz, and runs each for a bounded time on its seed corpus. Fails on
# the first crash, leak or sanitizer report (docs/robustness.md).
#
#     scripts/fuzz.sh [SECONDS [TARGET...]]    (default: 15 seconds, every target)
#
# The corpus each run grows is kept in build-fuzz/fuzz-corpus/TARGET, so a
# later run starts from it; what a failing input was is saved as
# build-fuzz/fuzz-findings/TARGET-crash-* beside the run's log.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}
[ $# -gt 0 ] && shift
all=(fuzz_gguf fuzz_safetensors fuzz_hf_json fuzz_contract fuzz_plugins_yaml fuzz_tokenizer fuzz_model fuzz_serve_request
	fuzz_grammar fuzz_chat_tools)
targets=("${@:-${all[@]}}")
build=build-fuzz
data=${LOOM_TEST_DATA:-$PWD/../shared}

CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_FUZZ=ON -DLOOM_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz_make_seeds "${targets[@]}"
tests/fuzz/seeds.sh "$build"

mkdir -p "$build/fuzz-findings"
for t in "${targets[@]}"; do
	# What the target loads from the shared data once, if anything.
	case $t in
	fuzz_tokenizer) needs=$data/golden/tokenizer/ggml-vocab-bert-bge.gguf ;;
	fuzz_serve_request | fuzz_chat_tools) needs=$data/models/stories260K-f32.gguf ;;
	*) needs= ;;
	esac
	if [ -n "$needs" ] && [ ! -f "$needs" ]; then
		echo "SKIP $t: it loads $needs, which is absent"
		continue
	fi
	echo "== $t, ${seconds}s =="
	mkdir -p "$build/fuzz-corpus/$t"
	log=$build/fuzz-findings/$t.log
	if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=120 -rss_limit_mb=4096 -print_final_stats=1 \
		-artifact_prefix="$build/fuzz-findings/$t-" "$build/fuzz-corpus/$t" "$build/fuzz-seeds/$t" >"$log" 2>&1; then
		tail -n 60 "$log" >&2
		echo "$t failed: the input is in $build/fuzz-findings/, the whole log in $log" >&2
		exit 1
	fi
	grep -E '^Done [0-9]+ runs' "$log" || true
done
