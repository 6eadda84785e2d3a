#!/usr/bin/env bash
# Runs every fuzz target (func FuzzXxx in a _test.go file) of the root
# module, one after another, each for FUZZTIME (default 10s). New targets
# are picked up by themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
fuzztime=${FUZZTIME:-10s}

found=0
while read -r pkg dir; do
	for target in $(cat "$dir"/*_test.go 2>/dev/null | grep -o '^func Fuzz[A-Za-z0-9_]*' | cut -d' ' -f2 | sort -u); do
		found=1
		echo "fuzz: $pkg $target for $fuzztime"
		"$go" test -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" "$pkg"
	done
done < <("$go" list -f '{{.ImportPath}} {{.Dir}}' ./...)
if [ $found = 0 ]; then echo "fuzz: no fuzz targets yet"; fi
