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

# What test_serve runs against `loom serve` and test_chat_tools renders
# with, in each build directory's node/, pinned: the official openai
# client, the clients agents are built on (the Vercel AI SDK with its
# OpenAI-compatible provider, LangChain.js's ChatOpenAI, zod for their
# schemas), and @huggingface/jinja, the Jinja engine that renders the
# models' own chat templates (tests/tools/render_chat_template.mjs) for
# comparison with loom's renderers. All run on node 18 and later.
node_packages="openai@4.104.0 zod@3.25.76 ai@4.3.19 @ai-sdk/openai-compatible@0.2.16 @langchain/openai@0.3.17
	@langchain/core@0.3.80 @huggingface/jinja@0.5.11"
for dir in build-ci build-ci-asan; do
	[ -f "$dir/node/installed" ] && [ "$(cat "$dir/node/installed")" = "$node_packages" ] && continue
	mkdir -p "$dir/node"
	# shellcheck disable=SC2086 # one word a package
	npm install --prefix "$dir/node" --no-audit --no-fund $node_packages >/dev/null ||
		{ echo "npm install into $dir/node failed: $node_packages" >&2; exit 1; }
	echo "$node_packages" >"$dir/node/installed"
done

jobs=$(nproc)
run_suite() {
	local dir=$1; shift
	cmake -S . -B "$dir" -DLOOM_WERROR=ON -DLOOM_TESTS_REQUIRED=ON "$@" >/dev/null
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

# The public and plugin ABIs against their baselines in abi/ (the
# sanitizer build has the debug information abidw reads).
echo "== ABI =="
bash scripts/abi_check.sh build-ci-asan

# Then every fuzz target of tests/fuzz for a few seconds on its seed corpus
# (a clang build of its own; the long runs are in docs/robustness.md).
echo "== fuzz targets: clang, ASan + UBSan, 3 s each =="
scripts/fuzz.sh 3
