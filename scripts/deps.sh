#!/usr/bin/env bash
# Installs loom's build and test dependencies with apt-get, if missing.
# Sourced by the quick-start and test scripts.
loom_install_deps() {
	local pkgs=(cmake make gcc pkg-config libyaml-dev check libcjson-dev libpcre2-dev curl ca-certificates)
	local missing=()
	for p in "${pkgs[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	echo "installing: ${missing[*]}"
	local sudo=""
	[ "$(id -u)" -ne 0 ] && sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}
