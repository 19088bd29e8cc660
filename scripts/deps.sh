#!/usr/bin/env bash
# Installs loom's build and test dependencies with apt-get, if missing.
# Sourced by the quick-start and test scripts.
loom_apt_install() {
	local missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	local sudo=""
	[ "$(id -u)" -ne 0 ] && sudo="sudo"
	echo "installing: ${missing[*]}"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

# What building loom needs (libmicrohttpd is for `loom serve`).
loom_install_deps() {
	loom_apt_install cmake make gcc pkg-config libyaml-dev libcjson-dev libpcre2-dev libmicrohttpd-dev \
		curl ca-certificates
}

# What the tests add: Check, for `loom serve`'s tests nginx (a fleet
# behind a proxy) and node with npm (the official openai client), for the
# grammar tests the JSON-Schema-Test-Suite's instances and an independent
# validator (Python's jsonschema), for the Python binding's tests pytest and
# numpy, for the ABI check libabigail's abidw and abidiff
# (scripts/abi_check.sh), and for the fuzz
# targets (scripts/fuzz.sh) clang with its libFuzzer and sanitizer runtimes
# and LLVM's OpenMP.
loom_install_test_deps() {
	loom_apt_install check nginx-light nodejs clang libclang-rt-dev libomp-dev json-schema-test-suite \
		python3-jsonschema python3-pytest python3-numpy abigail-tools
	# NodeSource's nodejs bundles npm (and conflicts with Debian's npm
	# package); Debian's does not: install npm only where the command is
	# missing.
	command -v npm >/dev/null 2>&1 || loom_apt_install npm
}
