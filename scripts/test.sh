#!/usr/bin/env bash
# Builds loom twice - warnings as errors, then with AddressSanitizer and
# UndefinedBehaviorSanitizer - and runs every test in both builds.
# Reference data is read from ../shared (or $LOOM_TEST_DATA); tests that
# need it skip, saying so, when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
loom_install_deps
loom_install_test_deps

# The official openai npm client, which test_serve runs against `loom
# serve`, and @huggingface/jinja, the Jinja engine that renders the models'
# own chat templates (tests/tools/render_chat_template.mjs) for comparison
# with loom's renderers, in each build directory's node/ (openai 4.x runs on
# node 18 and later).
for dir in build-ci build-ci-asan; do
	[ -d "$dir/node/node_modules/openai" ] && [ -d "$dir/node/node_modules/@huggingface/jinja" ] && continue
	mkdir -p "$dir/node"
	npm install --prefix "$dir/node" --no-audit --no-fund openai@4 @huggingface/jinja@0.5.11 >/dev/null ||
		{ echo "npm install openai@4 @huggingface/jinja@0.5.11 into $dir/node failed" >&2; exit 1; }
done

jobs=$(nproc)
run_suite() {
	local dir=$1; shift
	cmake -S . -B "$dir" -DLOOM_WERROR=ON "$@" >/dev/null
	cmake --build "$dir" -j"$jobs"
	(cd "$dir" && ctest -j"$jobs" --output-on-failure)
}

echo "== release build, -Werror =="
run_suite build-ci -DCMAKE_BUILD_TYPE=Release

# The sanitizers check host code; the cuda plugin's kernels need only compile
# there, to PTX alone (no GPU runs them in CI, and SASS for every target is
# what makes nvcc slow).
echo "== AddressSanitizer + UndefinedBehaviorSanitizer =="
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	run_suite build-ci-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOOM_SANITIZE=ON -DLOOM_CUDA_ARCHITECTURES=80-virtual

# Then every fuzz target of tests/fuzz for a few seconds on its seed corpus
# (a clang build of its own; the long runs are in docs/robustness.md).
echo "== fuzz targets: clang, ASan + UBSan, 3 s each =="
scripts/fuzz.sh 3
