#!/usr/bin/env bash
# loom's ABI against the baselines committed in abi/ (libabigail's abidw
# and abidiff, Debian's abigail-tools):
#   - libloom.so's, the C API of include/loom.h, one baseline per major
#     version (abi/libloom.so.MAJOR.abi, the SONAME's): functions and
#     variables added, and fields appended to the structs that carry
#     their size (abi/libloom.supp), pass, noted; any other change (a
#     function gone, a struct changed otherwise) fails, unless the major
#     version (project(VERSION) in CMakeLists.txt and LOOM_VERSION_MAJOR
#     in loom.h) is bumped and its baseline written in the same commit;
#   - the plugins', include/loom/plugin_api.h as a backend plugin and a
#     format plugin see it, one baseline per LOOM_PLUGIN_ABI_VERSION
#     (abi/plugin-*.vN.abi): the core loads only plugins of its exact ABI
#     version, so any change fails unless that version is bumped with its
#     baselines.
# Only the types of the public headers count: a struct the headers leave
# opaque may change as it likes. BUILD is a build with debug information
# (scripts/test.sh's sanitizer build is RelWithDebInfo).
#
#     scripts/abi_check.sh BUILD            check
#     scripts/abi_check.sh --update BUILD   write the baselines of the versions the headers name (a
#                                           baseline is not rewritten over a change that needs a bump)
#     scripts/abi_check.sh --verdict OLD.so OLD_HEADERS NEW.so NEW_HEADERS
#                                           how NEW's ABI stands to OLD's: same, added or changed
#                                           (tests/test_abi.c)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The ABI of a shared object, as far as the headers under dir define it.
abi_of() { # OBJECT HEADERS_DIR OUT
	abidw --headers-dir "$2" --drop-private-types --no-corpus-path --no-comp-dir-path --short-locs --out-file "$3" "$1"
}

# What abidiff found between two ABI files: same, added (functions or
# variables added, or changes the suppressions $4 pass, nothing else) or
# changed; the report is left in $3.
compare() {
	local rc=0
	abidiff ${4:+--suppressions "$4"} "$1" "$2" >"$3" 2>&1 || rc=$?
	if [ $((rc & 3)) -ne 0 ]; then
		echo error
	elif [ "$rc" -eq 0 ] && grep -Eq "[1-9][0-9]* filtered out" "$3"; then
		echo added
	elif [ "$rc" -eq 0 ]; then
		echo same
	elif grep -Eq "summary: [1-9][0-9]* Removed|[1-9][0-9]* Changed" "$3"; then
		echo changed
	else
		echo added
	fi
}

if [ "${1:-}" = --verdict ]; then
	abi_of "$2" "$3" "$tmp/old.abi"
	abi_of "$4" "$5" "$tmp/new.abi"
	compare "$tmp/old.abi" "$tmp/new.abi" "$tmp/report" abi/libloom.supp
	exit 0
fi
update=0
if [ "${1:-}" = --update ]; then
	update=1
	shift
fi
build=${1:?usage: scripts/abi_check.sh [--update] BUILD}
major=$(sed -n 's/^#define LOOM_VERSION_MAJOR \([0-9]*\)$/\1/p' include/loom.h)
plugin=$(sed -n 's/^#define LOOM_PLUGIN_ABI_VERSION \([0-9]*\)$/\1/p' include/loom/plugin_api.h)
[ -n "$major" ] && [ -n "$plugin" ] || { echo "abi_check: cannot read the versions from the headers" >&2; exit 1; }
# name, object, baseline, the version a change needs bumped, suppressions
checks=(
	"libloom $build/libloom.so abi/libloom.so.$major.abi the_major_version abi/libloom.supp"
	"plugin-backend $build/plugins/loom-cpu-generic.so abi/plugin-backend.v$plugin.abi LOOM_PLUGIN_ABI_VERSION"
	"plugin-format $build/plugins/loom-gguf.so abi/plugin-format.v$plugin.abi LOOM_PLUGIN_ABI_VERSION"
)
failed=0
for c in "${checks[@]}"; do
	read -r name object baseline bump supp <<<"$c"
	bump=${bump//_/ }
	abi_of "$object" include "$tmp/$name.abi"
	verdict=none
	[ -f "$baseline" ] && verdict=$(compare "$baseline" "$tmp/$name.abi" "$tmp/$name.diff" "$supp")
	# The plugins' ABI is exact: an addition needs the bump too.
	[ "$verdict" = added ] && [ "$name" != libloom ] && verdict=changed
	if [ "$verdict" = error ]; then
		cat "$tmp/$name.diff" >&2
		echo "abi_check: abidiff could not compare $name" >&2
		failed=1
	elif [ $update -eq 1 ] && [ "$verdict" = changed ]; then
		cat "$tmp/$name.diff" >&2
		echo "abi_check: $baseline is not rewritten over this change: bump $bump first" >&2
		failed=1
	elif [ $update -eq 1 ]; then
		cp "$tmp/$name.abi" "$baseline"
		echo "abi_check: wrote $baseline"
	elif [ "$verdict" = none ]; then
		echo "abi_check: no baseline $baseline for the version the headers name: write it with --update" >&2
		failed=1
	elif [ "$verdict" = changed ]; then
		cat "$tmp/$name.diff" >&2
		echo "abi_check: $name's ABI changed against $baseline: bump $bump and write its baseline" \
			"(scripts/abi_check.sh --update BUILD) in the same commit" >&2
		failed=1
	elif [ "$verdict" = added ]; then
		echo "abi_check: $name: additions to $baseline (compatible):"
		grep -E "summary" "$tmp/$name.diff" | sed 's/^/  /'
	else
		echo "abi_check: $name: as $baseline"
	fi
done
exit $failed
