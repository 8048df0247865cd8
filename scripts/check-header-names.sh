#!/usr/bin/env bash
# Fails when a public header defines a name outside q4vk's namespace: every macro, typedef,
# struct/enum/union tag, enum constant, function and variable must start with q4vk_ or
# Q4VK_ (C hosts include q4vk.h beside ncnn, MNN and Vulkan headers). Only the standard
# includes <stddef.h>, <stdint.h> and <stdbool.h> are allowed.
# Usage: scripts/check-header-names.sh [HEADER...]   (default: include/q4vk.h)
#        scripts/check-header-names.sh --self-test   (proves the check catches each kind)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

check() { # header files...
    python3 - "$@" <<'EOF'
import re, sys

ALLOWED = re.compile(r"^(q4vk_|Q4VK_)")
STD_INCLUDES = {"stddef.h", "stdint.h", "stdbool.h"}
KEYWORDS = {"typedef", "struct", "enum", "union", "const", "extern", "static", "inline",
            "void", "char", "short", "int", "long", "float", "double", "signed", "unsigned",
            "volatile", "restrict"}

def names(text):
    """(kind, name) of everything the header defines, and the includes it makes."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'#ifdef\s+__cplusplus\s+extern\s+"C"\s*\{\s*#endif', " ", text)
    text = re.sub(r"#ifdef\s+__cplusplus\s+\}\s*#endif", " ", text)
    found, code = [], []
    for line in text.splitlines():
        d = re.match(r"\s*#\s*(\w+)\s*(.*)", line)
        if not d:
            code.append(line)
            continue
        if d.group(1) == "define":
            found.append(("macro", re.match(r"(\w+)", d.group(2)).group(1)))
        elif d.group(1) == "include":
            inc = re.match(r"<([^>]+)>", d.group(2))
            if not inc or inc.group(1) not in STD_INCLUDES:
                found.append(("include", d.group(2).strip()))
    tokens = re.findall(r"[A-Za-z_]\w*|\S", "\n".join(code))
    depth, statement, body_kind, enum_item_start = 0, [], [], True
    for i, t in enumerate(tokens):
        if t == "{":
            kinds = [s for s in statement if s in ("struct", "enum", "union")]
            body_kind.append(kinds[-1] if kinds else "block")
            depth += 1
            enum_item_start = True
            continue
        if t == "}":
            depth -= 1
            body_kind.pop()
            continue
        if depth > 0:
            if body_kind[-1] == "enum":
                if enum_item_start and re.match(r"[A-Za-z_]", t):
                    found.append(("enum constant", t))
                enum_item_start = t == ","
            continue
        statement.append(t)
        if t != ";":
            continue
        words = [s for s in statement if re.match(r"[A-Za-z_]\w*$", s)]
        for a, b in zip(statement, statement[1:]):
            if a in ("struct", "enum", "union") and re.match(r"[A-Za-z_]", b):
                found.append((a + " tag", b))
        joined = " ".join(statement)
        fnptr = re.search(r"\(\s*\*\s*([A-Za-z_]\w*)\s*\)", joined)
        if statement[0] == "typedef":
            name = fnptr.group(1) if fnptr else words[-1]
            found.append(("typedef", name))
        elif "(" in statement:
            before = statement[: statement.index("(")]
            found.append(("function", before[-1]))
        elif words and words[-1] not in KEYWORDS:
            tags = {b for a, b in zip(statement, statement[1:]) if a in ("struct", "enum", "union")}
            if not (len(words) == 2 and words[1] in tags):  # a bare `struct x;`
                found.append(("variable", words[-1]))
        statement = []
    return found

bad = 0
for path in sys.argv[1:]:
    for kind, name in names(open(path, encoding="utf-8").read()):
        if kind == "include" or not ALLOWED.match(name):
            print(f"{path}: {kind} {name} is outside the q4vk_/Q4VK_ namespace")
            bad += 1
if bad:
    sys.exit(1)
EOF
}

if [ "${1:-}" = "--self-test" ]; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    cat >"$tmp/bad.h" <<'EOF'
#ifndef Q4VK_H
#define Q4VK_H
#include <stdint.h>
#include <vulkan/vulkan.h>
#define ROLE_X 3
#define Q4VK_OK 0
typedef uint32_t role_t;
typedef void (*log_fn)(void *user);
typedef struct q4vk_ok { uint32_t fine; } plain_t;
struct tag_only { int a; };
enum colour { RED = 1, GREEN };
uint32_t helper(const struct q4vk_ok *desc);
extern const int table_size;
#endif
EOF
    out="$(check "$tmp/bad.h" || true)"
    status=0
    for want in "include <vulkan/vulkan.h>" "macro ROLE_X" "typedef role_t" "typedef log_fn" \
        "typedef plain_t" "struct tag tag_only" "enum tag colour" "enum constant RED" \
        "enum constant GREEN" "function helper" "variable table_size"; do
        grep -qF "$want is outside" <<<"$out" || { echo "self-test: missed $want" >&2; status=1; }
    done
    if grep -qE "Q4VK_H|Q4VK_OK|q4vk_ok|fine|stdint|desc" <<<"$out"; then
        echo "self-test: flagged an allowed name:" >&2
        echo "$out" >&2
        status=1
    fi
    [ "$status" -eq 0 ] && echo "check-header-names.sh self-test: every kind of foreign name is caught"
    exit "$status"
fi

if [ "$#" -eq 0 ]; then
    set -- "$root/include/q4vk.h"
fi
check "$@"
echo "header names: every name in $* starts with q4vk_/Q4VK_"
