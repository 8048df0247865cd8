#!/usr/bin/env bash
# Builds the release archive q4vk-<version>-<target>.tar.gz (and its .sha256) and checks it:
#   lib/libq4vk.so lib/libq4vk.a          the libraries (scripts/install.sh)
#   include/q4vk.h                        the C header
#   lib/cmake/q4vk/ lib/pkgconfig/q4vk.pc the CMake package and pkg-config file
#   LICENSE-MIT LICENSE-APACHE README.md CHANGELOG.md docs/
# The check unpacks the archive at another path, after the staging tree is deleted, and
# builds and runs examples_c/vendored against it with find_package (Q4VK_USE=package): the
# demos against q4vk::q4vk and q4vk::q4vk_static, and the pkg-config version.
# Before packaging it checks that the version agrees in Cargo.toml, the header's top
# comment and CHANGELOG.md. The archive's metadata is deterministic: entries sorted, owner
# 0, mtime of the last commit (SOURCE_DATE_EPOCH when set), no gzip timestamp.
# Usage: scripts/package.sh [OUT_DIR]   (default: build/package)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/build/package}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

version="$(sed -n 's/^version *= *"\([^"]*\)".*/\1/p' "$root/Cargo.toml" | head -n1)"
target="$(rustc -vV | sed -n 's/^host: //p')"
name="q4vk-$version-$target"

fail() { echo "package.sh: $*" >&2; exit 1; }
head -n 5 "$root/include/q4vk.h" | grep -q "^ \* q4vk $version " ||
    fail "the top comment of include/q4vk.h does not name q4vk $version (cbindgen.toml header)"
grep -q "^## \[$version\] - [0-9]\{4\}-[0-9]\{2\}-[0-9]\{2\}\$" "$root/CHANGELOG.md" ||
    fail "CHANGELOG.md has no '## [$version] - YYYY-MM-DD' section"

check="$(mktemp -d)" # logs, then the unpacked archive and the example's build
trap 'rm -rf "$check"' EXIT
stage="$out/$name"
rm -rf "$stage"
"$root/scripts/install.sh" "$stage" >"$check/install.log" 2>&1 ||
    { cat "$check/install.log"; fail "scripts/install.sh failed"; }
install -m 0644 "$root/LICENSE-MIT" "$root/LICENSE-APACHE" "$root/README.md" \
    "$root/CHANGELOG.md" "$stage/"
cp -r "$root/docs" "$stage/docs"

epoch="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)}"
archive="$out/$name.tar.gz"
tar -C "$out" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    -cf - "$name" | gzip -n >"$archive"
(cd "$out" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
rm -rf "$stage"
echo "   $archive ($(du -h "$archive" | cut -f1)), sha256 $(cut -c1-16 "$archive.sha256")..."

# The check, at another path.
tar -C "$check" -xzf "$archive"
unpacked="$check/$name"
for f in lib/libq4vk.so lib/libq4vk.a include/q4vk.h lib/cmake/q4vk/q4vk-config.cmake \
    lib/cmake/q4vk/q4vk-config-version.cmake lib/cmake/q4vk/q4vk-targets.cmake \
    lib/pkgconfig/q4vk.pc LICENSE-MIT LICENSE-APACHE README.md CHANGELOG.md docs/abi.md; do
    [ -s "$unpacked/$f" ] || fail "the archive lacks $f"
done
pc_version="$(PKG_CONFIG_PATH="$unpacked/lib/pkgconfig" pkg-config --modversion q4vk)"
[ "$pc_version" = "$version" ] || fail "pkg-config says $pc_version, not $version"
cmake -S "$root/examples_c/vendored" -B "$check/example" -DQ4VK_USE=package \
    -DCMAKE_PREFIX_PATH="$unpacked" -DCMAKE_BUILD_TYPE=Release >"$check/configure.log" 2>&1 ||
    { cat "$check/configure.log"; fail "configuring the example against the archive failed"; }
cmake --build "$check/example" -j "$(nproc 2>/dev/null || echo 2)" >"$check/build.log" 2>&1 ||
    { cat "$check/build.log"; fail "building the example against the archive failed"; }
readelf -d "$check/example/gemv_demo" | grep -qF "[$unpacked/lib]" ||
    fail "gemv_demo does not take libq4vk.so from the unpacked archive"
(cd "$check/example" && ctest --output-on-failure >"$check/ctest.log" 2>&1) ||
    { cat "$check/ctest.log"; fail "the example failed against the archive"; }
echo "   ok: unpacked at another path; examples_c/vendored (find_package) built and passed:" \
    "$(grep -o '[0-9]*% tests passed.*' "$check/ctest.log")"
