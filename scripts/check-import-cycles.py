#!/usr/bin/env python3
"""Fails when the modules of a source folder import each other in a circle.

    scripts/check-import-cycles.py [FOLDER ...]     (default: src/vk src/plan)

Reads each `FOLDER/*.rs` (one module per file) and collects the sibling modules it names
through `super::NAME` or `crate::<folder>::NAME` outside comments and outside its
`#[cfg(test)]` module (tests may reach anywhere). Prints each import circle found (a
strongly connected set of modules) and exits 1; prints "no import circles" and exits 0
otherwise. `--self-test` checks the finder on a small made-up folder.
"""
import os
import re
import sys
import tempfile


def imports(folder):
    """module -> set of sibling modules it imports."""
    names = {f[:-3] for f in os.listdir(folder) if f.endswith(".rs")}
    crate_path = folder.replace(os.sep, "/").split("src/", 1)[-1].replace("/", "::")
    graph = {}
    for name in sorted(names):
        deps = set()
        with open(os.path.join(folder, name + ".rs"), encoding="utf-8") as f:
            for line in f:
                text = line.strip()
                if line.startswith("#[cfg(test)]"):
                    break
                if text.startswith("//"):
                    continue
                for m in re.finditer(r"\bsuper::(\w+)", text):
                    deps.add(m.group(1))
                for m in re.finditer(r"\bcrate::" + re.escape(crate_path) + r"::(\w+)", text):
                    deps.add(m.group(1))
                grouped = re.match(r"(?:pub(?:\([^)]*\))? )?use super::\{(.*)\}", text)
                if grouped:
                    for part in grouped.group(1).split(","):
                        head = part.strip().split("::")[0]
                        if head:
                            deps.add(head)
        deps.discard(name)
        graph[name] = deps & names
    return graph


def circles(graph):
    """Strongly connected sets of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        folder = os.path.join(root, "src", "demo")
        os.makedirs(folder)
        files = {
            "a.rs": "use super::b::B;\n",
            "b.rs": "use super::{c::C, d};\n",
            "c.rs": "// use super::a;\nuse crate::demo::a::A;\n",
            "d.rs": "fn x() {}\n#[cfg(test)]\nmod tests { use super::super::a; }\n",
        }
        for name, text in files.items():
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                f.write(text)
        got = circles(imports(folder))
        assert got == [["a", "b", "c"]], got
        os.remove(os.path.join(folder, "c.rs"))
        assert circles(imports(folder)) == [], "no circle without c"
    print("check-import-cycles self-test passed")


def main(argv):
    if argv[1:2] == ["--self-test"]:
        self_test()
        return 0
    folders = argv[1:] or ["src/vk", "src/plan"]
    bad = False
    for folder in folders:
        for group in circles(imports(folder)):
            print(f"{folder}: import circle: {' -> '.join(group)}")
            bad = True
    if not bad:
        print(f"no import circles in {', '.join(folders)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
