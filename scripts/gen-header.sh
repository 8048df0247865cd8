#!/usr/bin/env bash
# Regenerates include/q4vk.h from the Rust sources with the pinned cbindgen.
# With --check, fails (without writing) when the committed header differs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/include/q4vk.h"
if [ "${1:-}" = "--check" ]; then
    tmp="$(mktemp)"
    trap 'rm -f "$tmp"' EXIT
    (cd "$root" && cbindgen --quiet --config cbindgen.toml --output "$tmp")
    if ! diff -u "$out" "$tmp"; then
        echo "include/q4vk.h is stale: run scripts/gen-header.sh and commit the result" >&2
        exit 1
    fi
    echo "include/q4vk.h is up to date"
else
    (cd "$root" && cbindgen --quiet --config cbindgen.toml --output "$out")
fi
