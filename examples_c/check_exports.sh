#!/bin/sh
# Checks the dynamic symbol table of libq4vk.so: every defined export starts with q4vk_,
# and the exports are exactly the functions the header declares.
# Usage: check_exports.sh path/to/libq4vk.so path/to/q4vk.h
set -eu
lib="$1"
header="$2"
exports="$(nm -D --defined-only "$lib" | awk '{ print $NF }' | sort -u)"
[ -n "$exports" ] || { echo "FAIL: nm -D --defined-only $lib printed nothing"; exit 1; }
others="$(printf '%s\n' "$exports" | grep -v '^q4vk_' || true)"
if [ -n "$others" ]; then
    echo "FAIL: $lib exports symbols without the q4vk_ prefix:"
    printf '  %s\n' $others
    exit 1
fi
# Functions the header declares: strip comments, take every q4vk_ name followed by '('.
declared="$(sed -e 's://.*$::' "$header" | tr '\n' ' ' | sed -e 's:/\*[^*]*\*\+\([^/*][^*]*\*\+\)*/::g' \
    | grep -o 'q4vk_[A-Za-z0-9_]*[[:space:]]*(' | sed 's/[[:space:](]//g' | sort -u)"
if [ "$exports" != "$declared" ]; then
    echo "FAIL: exports and header declarations differ (< exported only, > declared only):"
    tmp="$(mktemp)"
    printf '%s\n' "$exports" >"$tmp"
    printf '%s\n' "$declared" | diff "$tmp" - | grep '^[<>]' || true
    rm -f "$tmp"
    exit 1
fi
echo "ok: $(printf '%s\n' "$exports" | wc -l) exports, all q4vk_, all declared in the header:"
printf '  %s\n' $exports
