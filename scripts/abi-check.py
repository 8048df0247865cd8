#!/usr/bin/env python3
"""ABI check of the C header against every released version (docs/abi.md).

  scripts/abi-check.py                 check include/q4vk.h against every abi/<version>/
  scripts/abi-check.py --dump HEADER   print HEADER's ABI dump (the abi/<version>/abi.txt format)
  scripts/abi-check.py --self-test     prove the check fails on broken headers and passes
                                       on compatible additions

An ABI dump lists, one entry per line, every struct's size and alignment, every field's
offset, size and type, every constant's value, every typedef and every function's
signature. It is measured, not guessed: the header is parsed here, a C11 program is
generated from it that pins each parsed type with _Static_assert(_Generic(...)) (so a
misread declaration fails to compile) and prints the sizes, offsets and values the
compiler computes. Types are written with integer typedefs resolved (q4vk_status ->
uint32_t), so the dump describes the binary interface.

The check fails on any entry of a released dump that is missing or different in the
current one. Allowed: new functions, constants, typedefs and structs, and new fields at
the end of an extensible struct (one whose first field is struct_size), which may then
grow. Each abi/<version>/abi.txt must also be the dump of abi/<version>/q4vk.h.
Python 3 standard library and a C compiler ($CC, default cc) only.
"""

import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Macros whose value is the release number: recorded by name only.
VERSION_MACROS = {"Q4VK_VERSION_MAJOR", "Q4VK_VERSION_MINOR", "Q4VK_VERSION_PATCH"}


class AbiError(Exception):
    """A header this tool cannot read, or a compiler failure."""


def strip_comments(text):
    """Removes /* */ and // comments (the header has no string literals holding them)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def c_only(text):
    """Drops the lines inside #ifdef __cplusplus blocks and returns (defines, code) where
    defines is [(name, value text)] in order and code the remaining non-# text."""
    defines, code, skipping = [], [], 0
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            directive = s[1:].strip()
            if directive.startswith("ifdef __cplusplus"):
                skipping += 1
            elif directive.startswith("endif") and skipping:
                skipping -= 1
            elif not skipping and directive.startswith("define "):
                parts = directive[len("define "):].strip().split(None, 1)
                if len(parts) == 2:  # include guards have no value
                    defines.append((parts[0], " ".join(parts[1].split())))
            continue
        if not skipping:
            code.append(line)
    return defines, "\n".join(code)


def statements(code):
    """Splits C declarations at top-level semicolons."""
    out, depth, cur = [], 0, []
    for ch in code:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == ";" and depth == 0:
            out.append(" ".join("".join(cur).split()))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        raise AbiError("text after the last declaration: " + "".join(cur).strip()[:80])
    return [s for s in out if s]


def norm_type(text):
    """Canonical spelling of a type: tokens separated by single spaces ('const char * const *')."""
    return " ".join(re.findall(r"[A-Za-z_]\w*|\*|\[|\]|\d+|\(|\)|,", text))


def declarator(text):
    """Splits 'type name[N]' into (type, name, '[N]...'); a bare type gives name None."""
    m = re.match(r"^(.*?)\b([A-Za-z_]\w*)\s*((?:\[\s*\w+\s*\])*)$", text.strip())
    if not m or not m.group(1).strip() or m.group(1).strip() in ("struct", "const"):
        return norm_type(text), None, ""
    return norm_type(m.group(1)), m.group(2), re.sub(r"\s+", "", m.group(3))


def param_types(text):
    """Types of a parameter list, names dropped; '()' and '(void)' give 'void'."""
    text = text.strip()
    if text in ("", "void"):
        return "void"
    return ", ".join(declarator(p)[0] for p in text.split(","))


def parse_header(path):
    """Reads the header into a model: constants, macros, opaque types, typedefs, structs
    and functions, each in header order."""
    with open(path, encoding="utf-8") as f:
        defines, code = c_only(strip_comments(f.read()))
    model = {"consts": [], "versions": [], "macros": [], "opaque": [], "aliases": [], "fnptrs": [],
             "structs": [], "funcs": []}
    for name, value in defines:
        if name in VERSION_MACROS:
            model["versions"].append(name)
        elif re.search(r"[A-Za-z_]", value):
            model["macros"].append((name, value))  # defined in terms of other macros
        else:
            model["consts"].append(name)
    for st in statements(code):
        m = re.match(r"^typedef struct (\w+) (\w+)$", st)
        if m and m.group(1) == m.group(2):
            model["opaque"].append(m.group(1))
            continue
        m = re.match(r"^typedef struct (\w+) \{(.*)\} (\w+)$", st)
        if m and m.group(1) == m.group(3):
            fields = [declarator(f) for f in m.group(2).split(";") if f.strip()]
            if any(name is None for _, name, _ in fields):
                raise AbiError("unnamed field in struct " + m.group(1))
            model["structs"].append((m.group(1), fields))
            continue
        m = re.match(r"^typedef (.+?)\(\s*\*\s*(\w+)\s*\)\s*\((.*)\)$", st)
        if m:
            model["fnptrs"].append((m.group(2), norm_type(m.group(1)), param_types(m.group(3))))
            continue
        m = re.match(r"^typedef (.+?)\b(\w+)$", st)
        if m:
            model["aliases"].append((m.group(2), norm_type(m.group(1))))
            continue
        m = re.match(r"^(.+?)\b(q4vk_\w+)\s*\((.*)\)$", st)
        if m and "(" not in m.group(1):
            model["funcs"].append((m.group(2), norm_type(m.group(1)), param_types(m.group(3))))
            continue
        raise AbiError("unrecognized declaration: " + st[:120])
    return model


def resolver(model):
    """Returns a function that rewrites integer typedef names in a type to their target."""
    targets = {}
    for name, target in model["aliases"]:
        targets[name] = target

    def resolve(t):
        toks = t.split(" ")
        for _ in range(8):  # typedef chains are short; bounded against cycles
            new = []
            for tok in toks:
                new.extend(targets[tok].split(" ") if tok in targets else [tok])
            if new == toks:
                break
            toks = new
        return " ".join(toks)

    return resolve


def c_string(s):
    """A C string literal holding s."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def fn_type(ret, params, declarator_text="(*)"):
    """A function type ('ret (*)(params)'), or with a name as declarator, a prototype."""
    return f"{ret} {declarator_text}({params})"


def generate_program(model, header):
    """C11 source that pins the parsed types and prints the dump."""
    resolve = resolver(model)
    out = ["#include <stddef.h>", "#include <stdint.h>", "#include <stdio.h>",
           f"#include {c_string(header)}",
           "#define PIN(expr, type, what) _Static_assert(_Generic((expr), type: 1, default: 0), what)",
           "int main(void) {",
           '  puts("# q4vk C ABI dump (scripts/abi-check.py --dump q4vk.h); do not edit");',
           '  printf("platform pointer=%zu size_t=%zu\\n", sizeof(void *), sizeof(size_t));']
    for name in model["consts"]:
        out.append(f'  printf("const {name} = %lld\\n", (long long)({name}));')
    for name in model["versions"]:
        out.append(f'  if ((long long)({name}) >= 0) puts("version {name}");')
    for name, value in model["macros"]:
        out.append(f'  puts({c_string(f"macro {name} = {value}")});')
    for name in model["opaque"]:
        out.append(f"  {{ struct {name} *p = (struct {name} *)0; (void)p; }}")
        out.append(f'  puts("opaque {name}");')
    for name, target in model["aliases"]:
        if target.startswith("struct "):
            raise AbiError(f"typedef {name}: only integer typedefs are expected")
        resolved = resolve(target)
        out.append(f"  PIN(({name})0, {resolved}, {c_string('typedef ' + name)});")
        out.append(f'  printf("typedef {name} = {resolved} size=%zu\\n", sizeof({name}));')
    for name, ret, params in model["fnptrs"]:
        sig = fn_type(resolve(ret), resolve(params))
        out.append(f"  PIN(({name})0, {sig}, {c_string('typedef ' + name)});")
        out.append(f"  puts({c_string(f'typedef {name} = {sig}')});")
    for name, fields in model["structs"]:
        extensible = bool(fields) and fields[0][1] == "struct_size" and fields[0][0] == "uint32_t"
        out.append(f'  printf("struct {name} size=%zu align=%zu{" extensible" if extensible else ""}\\n", '
                   f"sizeof(struct {name}), _Alignof(struct {name}));")
        for ftype, fname, dims in fields:
            t = resolve(ftype)
            ptr = f"{t} (*){dims}" if dims else f"{t} *"
            member = f"((struct {name} *)0)->{fname}"
            out.append(f"  PIN(&{member}, {ptr}, {c_string(f'{name}.{fname}')});")
            out.append(f'  printf("field {name}.{fname} offset=%zu size=%zu type={t}{dims}\\n", '
                       f"offsetof(struct {name}, {fname}), sizeof({member}));")
    for name, ret, params in model["funcs"]:
        sig = fn_type(resolve(ret), resolve(params))
        out.append(f"  PIN(&{name}, {sig}, {c_string(name)});")
        out.append(f"  puts({c_string(f'func {name} = {fn_type(resolve(ret), resolve(params), name)}')});")
    out += ["  return 0;", "}", ""]
    return "\n".join(out)


def dump(header):
    """The ABI dump of a header, as text (compiles and runs a generated C program)."""
    header = os.path.abspath(header)
    program = generate_program(parse_header(header), header)
    cc = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "abi_dump.c"), os.path.join(tmp, "abi_dump")
        with open(src, "w", encoding="utf-8") as f:
            f.write(program)
        build = subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-o", exe, src],
                               capture_output=True, text=True)
        if build.returncode != 0:
            raise AbiError(f"{cc} failed on the program generated from {header}:\n{build.stderr}")
        run = subprocess.run([exe], capture_output=True, text=True, check=True)
    return run.stdout


def entries(text):
    """Dump text -> {key: value}: the key is the kind and name ('field s.f'), the value the rest."""
    out = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        kind, rest = line.split(" ", 1)
        name, _, value = rest.partition(" ")
        out[f"{kind} {name}"] = value
    return out


def struct_props(value):
    """(size, align, extensible) of a struct entry's value."""
    props = dict(p.split("=") for p in value.split() if "=" in p)
    return int(props["size"]), int(props["align"]), "extensible" in value.split()


def compare(base_text, cur_text):
    """Returns (problems, additions): what breaks the released ABI, and what is new."""
    base, cur = entries(base_text), entries(cur_text)
    problems, additions = [], []
    for key, value in base.items():
        if key not in cur:
            problems.append(f"removed: {key} {value}")
        elif key.startswith("struct ") and cur[key] != value:
            size, align, ext = struct_props(value)
            new_size, new_align, new_ext = struct_props(cur[key])
            if not (ext and new_ext and new_align == align and new_size >= size):
                problems.append(f"changed: {key} {value} -> {cur[key]}")
        elif cur[key] != value:
            problems.append(f"changed: {key} {value} -> {cur[key]}")
    for key, value in cur.items():
        if key in base:
            continue
        additions.append(f"added: {key} {value}")
        if key.startswith("field "):
            struct = "struct " + key.split(" ", 1)[1].split(".")[0]
            if struct in base:
                size, _, ext = struct_props(base[struct])
                offset = int(dict(p.split("=") for p in value.split()[:1])["offset"])
                if not ext or offset < size:
                    problems.append(f"not appended: {key} {value} (released {struct} is "
                                    f"{size} bytes{'' if ext else ', not extensible'})")
    return problems, additions


def baselines():
    """abi/<version>/ directories, oldest first."""
    base = os.path.join(ROOT, "abi")
    versions = [v for v in os.listdir(base) if os.path.isfile(os.path.join(base, v, "abi.txt"))]
    return sorted(versions, key=lambda v: [int(x) for x in re.findall(r"\d+", v)])


def check(header):
    """Compares header with every release's dump; prints the findings, True when compatible."""
    current = dump(header)
    failed = False
    for version in baselines():
        vdir = os.path.join(ROOT, "abi", version)
        with open(os.path.join(vdir, "abi.txt"), encoding="utf-8") as f:
            recorded = f.read()
        if recorded != dump(os.path.join(vdir, "q4vk.h")):
            print(f"FAIL abi/{version}/abi.txt is not the dump of abi/{version}/q4vk.h")
            failed = True
            continue
        problems, additions = compare(recorded, current)
        for p in problems:
            print(f"FAIL vs {version}: {p}")
        failed |= bool(problems)
        print(f"{'FAIL' if problems else 'ok'}: {os.path.relpath(header, ROOT)} vs {version}: "
              f"{len(entries(recorded))} released entries, {len(problems)} broken, "
              f"{len(additions)} added")
    if not baselines():
        print("FAIL: no abi/<version>/abi.txt found")
        failed = True
    return not failed


# Self-test mutations of the oldest released header: (what, old text, new text, key the
# check must name, or None when the check must pass).
MUTATIONS = [
    ("two fields swapped", "  uint64_t x_row_stride;\n  // Elements between rows of y; 0 = n.\n  uint64_t y_row_stride;",
     "  uint64_t y_row_stride;\n  // Elements between rows of y; 0 = n.\n  uint64_t x_row_stride;",
     "field q4vk_gemv_args.x_row_stride"),
    ("field inserted mid-struct", "  q4vk_algo algo;", "  uint64_t inserted;\n  q4vk_algo algo;",
     "field q4vk_weight_quantize_desc.algo"),
    ("field type changed, same size", "  int32_t device_index;", "  uint32_t device_index;",
     "field q4vk_context_desc.device_index"),
    ("field appended to a non-extensible struct", "  uint32_t value;\n} q4vk_kernel_specialization;",
     "  uint32_t value;\n  uint32_t extra;\n} q4vk_kernel_specialization;",
     "struct q4vk_kernel_specialization"),
    ("constant value changed", "#define Q4VK_ERROR_INTERNAL 12", "#define Q4VK_ERROR_INTERNAL 13",
     "const Q4VK_ERROR_INTERNAL"),
    ("constant removed", "#define Q4VK_DTYPE_BF16 2\n", "", "const Q4VK_DTYPE_BF16"),
    ("function removed", "void q4vk_matrix_destroy(struct q4vk_matrix *mat);", "",
     "func q4vk_matrix_destroy"),
    ("parameter type changed", "                      uint32_t m);", "                      uint64_t m);",
     "func q4vk_gemv"),
    ("return type changed", "size_t q4vk_last_error_message(", "uint32_t q4vk_last_error_message(",
     "func q4vk_last_error_message"),
    ("callback signature changed", "typedef void (*q4vk_log_fn)(void *user, uint32_t level,",
     "typedef void (*q4vk_log_fn)(void *user, int32_t level,", "typedef q4vk_log_fn"),
    ("status type changed", "typedef uint32_t q4vk_status;", "typedef int32_t q4vk_status;",
     "typedef q4vk_status"),
    ("field, function and constant added",
     "  size_t zeros_bytes;\n} q4vk_matrix_desc;",
     "  size_t zeros_bytes;\n  uint64_t appended;\n} q4vk_matrix_desc;\n"
     "#define Q4VK_NEW_CONSTANT 99\n"
     "#ifdef __cplusplus\nextern \"C\" {\n#endif\n"
     "q4vk_status q4vk_new_function(const struct q4vk_matrix_desc *desc, uint32_t x);\n"
     "#ifdef __cplusplus\n}\n#endif",
     None),
]


def self_test():
    """Runs MUTATIONS on the oldest released header; True when each gives the expected result."""
    version = baselines()[0]
    with open(os.path.join(ROOT, "abi", version, "q4vk.h"), encoding="utf-8") as f:
        original = f.read()
    base = dump(os.path.join(ROOT, "abi", version, "q4vk.h"))
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for what, old, new, key in MUTATIONS:
            if original.count(old) != 1:
                print(f"FAIL self-test '{what}': the text to change is not in abi/{version}/q4vk.h once")
                failures += 1
                continue
            path = os.path.join(tmp, "q4vk.h")
            with open(path, "w", encoding="utf-8") as f:
                f.write(original.replace(old, new))
            problems, additions = compare(base, dump(path))
            if key is None:
                ok = not problems and len(additions) == 3
                detail = f"passes with {len(additions)} additions"
            else:
                ok = any(p.split(" ", 1)[1].startswith(key + " ") for p in problems)
                detail = "; ".join(problems[:2] + ["..."] * (len(problems) > 2)) or "no problem found"
            print(f"{'ok  ' if ok else 'FAIL'} {what}: {detail}")
            failures += not ok
    print(f"self-test: {len(MUTATIONS) - failures}/{len(MUTATIONS)} as expected")
    return failures == 0


def main(argv):
    """Command line: no argument, --dump HEADER or --self-test (see the module doc)."""
    try:
        if len(argv) == 3 and argv[1] == "--dump":
            sys.stdout.write(dump(argv[2]))
            return 0
        if len(argv) == 2 and argv[1] == "--self-test":
            return 0 if self_test() else 1
        if len(argv) == 1:
            return 0 if check(os.path.join(ROOT, "include", "q4vk.h")) else 1
    except AbiError as e:
        print(f"FAIL: {e}")
        return 1
    print("\n\n".join(__doc__.strip().split("\n\n")[:2]), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
