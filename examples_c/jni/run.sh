#!/usr/bin/env bash
# Builds and runs the JNI binding test on whatever Vulkan device exists (lavapipe in CI):
#   1. installs q4vk (scripts/install.sh) unless Q4VK_PREFIX names an installed tree;
#   2. javac -h: compiles org.q4vk.* and the test, generating the JNI header;
#   3. compiles the shim q4vk_jni.c (-Wall -Wextra -Werror) against the installed q4vk.h
#      and $JAVA_HOME/include into libq4vk_jni.so, linked to libq4vk.so (rpath);
#   4. runs org.q4vk.Q4vkTest with -Xcheck:jni; any JNI warning fails the run too.
# Usage: examples_c/jni/run.sh    (env: Q4VK_PREFIX, JAVA_HOME, CC)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="$root/build/jni"
prefix="${Q4VK_PREFIX:-}"
if [ -z "$prefix" ]; then
    prefix="$work/install"
    "$root/scripts/install.sh" "$prefix"
fi
prefix="$(cd "$prefix" && pwd)"
if [ -z "${JAVA_HOME:-}" ]; then
    JAVA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")"
fi
cc="${CC:-cc}"
rm -rf "$work/classes" "$work/gen"
mkdir -p "$work/classes" "$work/gen"

echo "== javac -h ($("$JAVA_HOME/bin/javac" -version 2>&1))"
"$JAVA_HOME/bin/javac" -Xlint:all -Werror -d "$work/classes" -h "$work/gen" \
    "$here"/src/org/q4vk/*.java "$here"/test/org/q4vk/*.java

echo "== cc q4vk_jni.c -> libq4vk_jni.so"
"$cc" -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -g -fPIC -shared -Wall -Wextra -Werror \
    -I"$work/gen" -I"$prefix/include" -I"$JAVA_HOME/include" -I"$JAVA_HOME/include/linux" \
    "$here/q4vk_jni.c" -o "$work/libq4vk_jni.so" \
    -L"$prefix/lib" -lq4vk -lpthread -Wl,-rpath,"$prefix/lib" -Wl,--no-undefined

echo "== java org.q4vk.Q4vkTest (-Xcheck:jni)"
log="$work/test.log"
set +e
"$JAVA_HOME/bin/java" -Xcheck:jni -Dq4vk.jni.library="$work/libq4vk_jni.so" \
    -cp "$work/classes" org.q4vk.Q4vkTest 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
if grep -q "WARNING in native method\|FATAL ERROR in native method" "$log"; then
    echo "run.sh: -Xcheck:jni reported a JNI misuse (see above)"
    exit 1
fi
exit "$rc"
