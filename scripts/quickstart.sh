#!/usr/bin/env bash
# Builds loom and generates text from a small real model: the stories260K
# llama from ../shared/models when present, else downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/deps.sh
loom_install_deps

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLOOM_BUILD_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)"

model=../shared/models/stories260K-f32.gguf
if [ ! -f "$model" ]; then
	model=build/models/stories260K.gguf
	if [ ! -f "$model" ]; then
		mkdir -p build/models
		curl -fL --retry 3 -o "$model.part" \
			https://huggingface.co/ggml-org/tiny-llamas/resolve/main/stories260K.gguf
		mv "$model.part" "$model"
	fi
fi
./build/loom run -m "$model" -p "Once upon a time" -n 64 --temp 0
