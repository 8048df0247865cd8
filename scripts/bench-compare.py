#!/usr/bin/env python3
"""q4vk-bench results as JSON lines, and two runs compared case by case.

  bench-compare.py A.jsonl B.jsonl [--threshold 0.05]
      Joins the two files on (device, shape, m, type, x, path) and prints, per case, the
      cold µs in A and in B and B/A; a ratio past 1 ± threshold is marked slower / faster.
      Cases found in only one file are counted. Exit status 0.
      q4vk-bench --jsonl FILE writes such files itself (peer empty, no source).

  bench-compare.py --from-table RAW.txt [--commit C] [--date D] [--device S] [--driver S]
                   [--type T] [--x f16|f32]
      Converts the text tables q4vk-bench prints (the markdown tables of bench/history/*.txt)
      into JSON lines on stdout, one object per timed row. The options fill in, or override,
      what the raw file does not say. Exit status 1, with the reason, on a table it cannot read.

  bench-compare.py --self-test
      Runs the parser and the comparison on small embedded samples; exit status 1 on failure.

One object per timed case (bench/RESULTS.md, "Machine-readable results"):
  commit, date, device, driver  the run (null where unknown)
  shape {"n", "k"}, m           the case
  type                          weight form: a GGUF block type (Q4_K, IQ4_XS, ...), or
                                g<group>, then -zp (a zero point per group), -offsets (f32
                                scales and offsets), -act-order (only by --type)
  x                             f32 or f16 activations
  path                          the kernel as the bench names it; a shape the rules chose
                                (in brackets) is written [rule] and moved to "tile", with its
                                K slices to "slices"
  us, gbps                      cold median µs and cold GB/s (gbps null if the table has none)
  peer                          [{"name", "us"}]: llama.cpp and cuBLAS rows of the same n, k, m
                                in the same run of the file (llama.cpp of the same GGUF type
                                for a GGUF type; its Q4_0 and Q4_K for the others)
  hot_us, rel_err, tile, slices, source   optional
  chain_us, chain_hot_us                  optional: µs per call in a chain of dependent calls
                                          in one command buffer (q4vk-bench --chain)

What the converter reads, line by line:
  device: NAME (...)              the device (q4vk-bench's first line)
  NAME, DRIVER, ... MHz           nvidia-smi's line; or "driver X.Y.Z" in a comment line
  mode: ...; group G, FORM, X activations; ...      weight form and activation type
  mode: ...; GGUF T blocks ..., X activations; ...  (a GGUF block type T)
  | N × K | m | path | cold µs | ...                 a table header; its rows follow
  # Columns ...: N × K | m | path | cold µs | ...     declares rows printed without the
                                                      leading "|" (cut tables)
  ## Call N / ## Run N            starts a new run (peers and "build <hash>" are per run);
                                  other headings do not
  MUL_MAT(name=TYPE_nN_kK_mM ...): ... T us/run       llama.cpp (test-backend-ops perf)
  q4_0_nN_kK_mM T us/run; ...                         llama.cpp, compact
  cublas N x K m=M T us [; m=M T us]                  cuBLAS fp16
  {"fp16_linear_cold": [{"n", "k", "m", "us"}, ...]}  cuBLAS fp16 (JSON)
Only python3's standard library is used.
"""

import argparse
import json
import os
import re
import sys
import tempfile

SHAPE_RE = re.compile(r"^(\d+)\s*[×x]\s*(\d+)$")
DATE_RE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
BUILD_RE = re.compile(r"\bbuild ([0-9a-f]{7,40})\b")
RUN_HEADING_RE = re.compile(r"^## (?:call|run) \d+\b", re.IGNORECASE)
SMI_RE = re.compile(r"^(NVIDIA [^,]+), (\d+\.\d+(?:\.\d+)?), ")
DRIVER_RE = re.compile(r"\bdriver (\d+\.\d+(?:\.\d+)?)\b")
DEVICE_COMMENT_RE = re.compile(r"\b(NVIDIA [A-Z][A-Za-z0-9-]*)")
MULMAT_RE = re.compile(r"MUL_MAT\(name=([a-z0-9]+(?:_[0-9A-Za-z]+)?)_n(\d+)_k(\d+)_m(\d+)\b.*?([\d.]+) us/run")
COMPACT_RE = re.compile(r"\b(q4_[0-9A-Za-z]+)_n(\d+)_k(\d+)_m(\d+)\s+([\d.]+)\b")
CUBLAS_RE = re.compile(r"^cublas (\d+) x (\d+) (.*)$")
CUBLAS_M_RE = re.compile(r"m=(\d+) ([\d.]+) us")
BRACKET_RE = re.compile(r"\[([0-9,]+)\]")
SLICES_RE = re.compile(r"\s*×(\d+) K slices")
# The header of `--load`'s table (matrix creation times), whose rows are skipped.
LOAD_TABLE = ("load",)


class TableError(Exception):
    """A table the converter cannot read; the message says where and why."""


def cells(line):
    """The cells of a markdown table row, without the outer pipes."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|"):
        body = body[:-1]
    return [c.strip() for c in body.split("|")]


def number(text):
    """The first number in a cell (µs, GB/s, rel. err), or None for '—' and the like."""
    m = re.search(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", text or "")
    return float(m.group(0)) if m else None


def parse_mode(line):
    """(type, x, m or None) from q4vk-bench's mode line."""
    gguf = re.search(r"\bGGUF (\S+) blocks", line)
    group = re.search(r"\bgroup (\d+)", line)
    x = re.search(r"\b(f16|f32) activations", line)
    m = re.search(r"\bm = (\d+)[,;]", line)
    form = "g%s" % group.group(1) if group else None
    if gguf:
        form = gguf.group(1)
    if form and "zero point per group" in line:
        form += "-zp"
    if form and "scales and offsets" in line:
        form += "-offsets"
    return form, (x.group(1) if x else None), (int(m.group(1)) if m else None)


def normalize_path(path):
    """(path, tile, slices): a rule-chosen shape in brackets becomes [rule]."""
    tile = slices = None
    bracket = BRACKET_RE.search(path)
    if bracket:
        tile = bracket.group(1)
        path = path[: bracket.start()] + "[rule]" + path[bracket.end():]
        s = SLICES_RE.search(path)
        if s:
            slices = int(s.group(1))
            path = path[: s.start()] + path[s.end():]
    return " ".join(path.split()), tile, slices


def peer_matches(peer, form):
    """Whether a peer's row times the same weights as a row of weight form `form`: llama.cpp
    on the same GGUF type for a GGUF form; else llama.cpp Q4_0 or Q4_K, or cuBLAS."""
    gguf = form[0].isupper()  # GGUF types by name (Q4_K); the Q4 layout's forms are g<group>...
    if not peer.startswith("llama.cpp"):
        return not gguf
    kind = peer.rsplit(" ", 1)[1]
    return kind == form.upper() if gguf else kind in ("Q4_0", "Q4_K")


def llama_name(kind, vulkan):
    return "llama.cpp %s%s" % ("Vulkan " if vulkan else "", kind.upper())


def collect_peers(lines):
    """{run index: {(n, k, m): [peer, ...]}} from llama.cpp and cuBLAS lines."""
    peers = {}
    run = 0
    vulkan = any("ggml_vulkan" in l for l in lines)

    def add(n, k, m, name, us):
        lst = peers.setdefault(run, {}).setdefault((int(n), int(k), int(m)), [])
        if not any(p["name"] == name for p in lst):
            lst.append({"name": name, "us": float(us)})

    for line in lines:
        if RUN_HEADING_RE.match(line):
            run += 1
            continue
        mm = MULMAT_RE.search(line)
        if mm:
            kind, n, k, m, us = mm.groups()
            add(n, k, m, llama_name(kind, vulkan), us)
            continue
        if "MUL_MAT" not in line:
            for kind, n, k, m, us in COMPACT_RE.findall(line):
                add(n, k, m, llama_name(kind, vulkan), us)
        cb = CUBLAS_RE.match(line.strip())
        if cb:
            n, k, rest = cb.groups()
            for m, us in CUBLAS_M_RE.findall(rest):
                add(n, k, m, "cuBLAS fp16", us)
            continue
        if '"fp16_linear_cold"' in line:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            for r in doc.get("fp16_linear_cold", []):
                add(r["n"], r["k"], r["m"], "cuBLAS fp16", r["us"])
    return peers


def from_table(text, name="RAW", commit=None, date=None, device=None, driver=None,
               type_=None, x=None):
    """The JSON objects of every timed row in a raw q4vk-bench output."""
    lines = text.splitlines()
    peers = collect_peers(lines)
    if date is None:
        d = DATE_RE.search(os.path.basename(name)) or DATE_RE.search(text[:2000])
        date = d.group(1) if d else None
    ctx = {"device": None, "driver": None, "form": None, "x": None, "m": None,
           "path": None, "file_commit": None, "run_commit": None}
    header = None      # column names of the current table
    declared = None    # column names of cut rows
    run = 0
    out = []
    for no, raw in enumerate(lines, 1):
        line = raw.rstrip()
        stripped = line.strip()
        if RUN_HEADING_RE.match(line):
            run += 1
            ctx["run_commit"] = None
            header = None
        if line.startswith("#"):
            b = BUILD_RE.search(line)
            if b:
                if line.startswith("## ") and run:
                    ctx["run_commit"] = b.group(1)
                elif not line.startswith("##"):
                    ctx["file_commit"] = b.group(1)
            drv = DRIVER_RE.search(line)
            if drv:
                ctx["driver"] = drv.group(1)
            dev = DEVICE_COMMENT_RE.search(line)
            if dev and ctx["device"] is None:
                ctx["device"] = dev.group(1)
            cols = re.search(r"\bColumns\b[^:|]*:(.*\|.*)$", line)
            if cols:
                declared = [("path" if c.startswith("path") else c.rstrip("."))
                            for c in cells(cols.group(1))]
            if not line.startswith("| "):
                continue
        smi = SMI_RE.match(line)
        if smi:
            ctx["device"], ctx["driver"] = smi.group(1), smi.group(2)
            continue
        if line.startswith("device: "):
            # The name may hold parentheses itself ("llvmpipe (LLVM 15.0.6, 256 bits)").
            said = line[len("device: "):]
            cut = said.find(" (path: ")
            ctx["device"] = (said[:cut] if cut >= 0 else re.split(r" \(", said, 1)[0]).strip()
            p = re.search(r"\(path: ([^;)]+)", line)
            ctx["path"] = p.group(1) if p else None
            header = None
            continue
        if line.startswith("mode: "):
            ctx["form"], ctx["x"], ctx["m"] = parse_mode(line)
            header = None
            continue
        if stripped.startswith("|"):
            row = cells(stripped)
            if row and row[0] == "N × K":
                # `--load`'s table times matrix creation, not kernels: no case to compare.
                if "from blob ms" in row:
                    header = LOAD_TABLE
                    continue
                for need in ("cold µs",):
                    if need not in row:
                        raise TableError(
                            "%s:%d: table header without a %r column; not a q4vk-bench table "
                            "(columns: %s)" % (name, no, need, " | ".join(row)))
                header = row
                continue
            if row and set("".join(row)) <= set("-: "):
                continue
            if row and SHAPE_RE.match(row[0]):
                if header is LOAD_TABLE:
                    continue
                if header is None:
                    raise TableError(
                        "%s:%d: a table row without a q4vk-bench header before it (expected "
                        "'| N × K | m | path | cold µs | ...')" % (name, no))
                out.append(make_row(row, header, name, no, ctx, peers.get(run, {}),
                                    commit, date, device, driver, type_, x))
            continue
        if declared and re.match(r"^\d+ × \d+ \|", stripped):
            if "N × K" not in declared or "cold µs" not in declared:
                raise TableError("%s:%d: the declared columns (%s) lack 'N × K' or 'cold µs'"
                                 % (name, no, " | ".join(declared)))
            out.append(make_row(cells(stripped), declared, name, no, ctx, peers.get(run, {}),
                                commit, date, device, driver, type_, x))
    if not out:
        raise TableError("%s: no q4vk-bench table found (a '| N × K | ... | cold µs | ...' "
                         "header and its rows)" % name)
    return out


def make_row(row, header, name, no, ctx, peers, commit, date, device, driver, type_, x):
    if len(row) < len(header):
        raise TableError("%s:%d: %d cells where the header has %d" % (name, no, len(row), len(header)))
    col = dict(zip(header, row))
    n, k = (int(v) for v in SHAPE_RE.match(col["N × K"]).groups())
    if "m" in col:
        m = int(number(col["m"]))
    elif ctx["m"] is not None:
        m = ctx["m"]
    else:
        raise TableError("%s:%d: no m column and no 'm = M' in the mode line" % (name, no))
    form = type_ or ctx["form"]
    xs = x or ctx["x"]
    if form is None or xs is None:
        raise TableError("%s:%d: no mode line before this table gives the weight form and the "
                         "activation type; pass --type and --x" % (name, no))
    path, tile, slices = normalize_path(col.get("path") or ctx["path"] or "default")
    us = number(col["cold µs"])
    if us is None:
        raise TableError("%s:%d: no cold µs in %r" % (name, no, col["cold µs"]))
    obj = {
        "commit": commit or ctx["run_commit"] or ctx["file_commit"],
        "date": date,
        "device": device or ctx["device"],
        "driver": driver or ctx["driver"],
        "shape": {"n": n, "k": k},
        "m": m,
        "type": form,
        "x": xs,
        "path": path,
        "us": us,
        "gbps": number(col.get("cold GB/s")),
        "peer": [p for p in peers.get((n, k, m), []) if peer_matches(p["name"], form)],
    }
    if "hot µs" in col:
        obj["hot_us"] = number(col["hot µs"])
    if "rel. err" in col:
        obj["rel_err"] = number(col["rel. err"])
    if tile:
        obj["tile"] = tile
    if slices:
        obj["slices"] = slices
    obj["source"] = "%s:%d" % (os.path.basename(name), no)
    return obj


def case_key(obj):
    s = obj["shape"]
    return (obj.get("device"), s["n"], s["k"], obj["m"], obj["type"], obj["x"], obj["path"])


def case_name(key):
    device, n, k, m, form, x, path = key
    return "%s × %s m=%s %s x=%s %s" % (n, k, m, form, x, path)


def load_jsonl(path):
    cases, dups = {}, 0
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
                key = case_key(obj)
            except (ValueError, KeyError, TypeError) as e:
                raise TableError("%s:%d: not a result line (%s)" % (path, no, e))
            if key in cases:
                dups += 1
                continue
            cases[key] = obj
    return cases, dups


def compare(a_cases, b_cases, threshold):
    """Table lines comparing the cases the two runs share."""
    shared = [k for k in a_cases if k in b_cases]
    shared.sort(key=lambda k: (str(k[0]), k[4], k[5], k[1], k[2], k[3], k[6]))
    rows = []
    for key in shared:
        a, b = a_cases[key]["us"], b_cases[key]["us"]
        ratio = b / a if a else float("inf")
        flag = ""
        if ratio > 1 + threshold:
            flag = "slower"
        elif ratio < 1 - threshold:
            flag = "faster"
        rows.append((case_name(key), a, b, ratio, flag))
    width = max([len("case")] + [len(r[0]) for r in rows])
    out = ["%-*s  %10s  %10s  %7s" % (width, "case", "A µs", "B µs", "B/A")]
    for name, a, b, ratio, flag in rows:
        out.append(("%-*s  %10.2f  %10.2f  %7.3f  %s" % (width, name, a, b, ratio, flag)).rstrip())
    only_a = len([k for k in a_cases if k not in b_cases])
    only_b = len([k for k in b_cases if k not in a_cases])
    slower = sum(1 for r in rows if r[4] == "slower")
    faster = sum(1 for r in rows if r[4] == "faster")
    out.append("%d cases in both (%d slower, %d faster beyond ±%g); %d only in A, %d only in B"
               % (len(rows), slower, faster, threshold, only_a, only_b))
    return out


SAMPLE_TABLE = """\
NVIDIA H200, 580.159.04, 345 MHz, 1980 MHz
### q4vk
device: NVIDIA H200 (path: coopmat; SIMT kernels: workgroup 128, 8 rows/workgroup, unroll 1, split 2)
compute-shader copy (uvec4, read + write): 4209 GB/s
mode: full; group 32, symmetric, f16 scales, f16 activations; medians of timestamp pairs; m > 8: rel. err of 3 tokens

| N × K | m | path | cold µs | cold GB/s | % of copy | cold TFLOP/s | hot µs | hot GB/s | naive cold µs | speed-up vs naive | rel. err | copy now GB/s | cold µs per copy: min – max (copies) |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
| 28672 × 8192 | 1 | coopmat 2×4 | 54.5 | 2698 | 64% | 8.6 | 54.5 | 2696 | 493.4 | 9.1× | 1.5e-7 | 4153 | 54.3 – 54.5 (3) |
| 28672 × 8192 | 64 | coopmat GEMM [2,4,64,1,4,1] x-fragments | 146.4 | 1060 | 25% | 205.3 | 145.4 | 1067 | — | — | 2.9e-7 | 1706 | 146.3 – 146.5 (3) |
| 8192 × 28672 | 64 | coopmat GEMM [4,4,32,1,2,1] ×4 K slices x-fragments | 171.6 | 889 | 21% | 175.2 | 171.6 | 889 | — | — | 2.7e-7 | 1673 | 171.2 – 171.7 (3) |
### llama.cpp
ggml_vulkan: 0 = NVIDIA H200 (NVIDIA) | uma: 0 | fp16: 1 | int dot: 1 | matrix cores: NV_coopmat2
  MUL_MAT(name=q4_0_n28672_k8192_m64,type=f32,ne=[28672,64,1,1]):   2187 runs -   463.67 us/run -   138240 kB/run -  284.33 GB/s
cublas 28672 x 8192 m=64 137.9 us 218.0 TFLOP/s
"""

# A GGUF block type's table beside llama.cpp on two types, then `--load`'s table (skipped).
SAMPLE_GGUF = """\
NVIDIA H100 80GB HBM3, 580.159.04, 1980 MHz
  MUL_MAT(name=q6_K_n4096_k4096_m1,type=f32,ne=[4096,1,1,1]):   9487 runs -   9.37 us/run -   13480 kB/run
  MUL_MAT(name=q4_0_n4096_k4096_m1,type=f32,ne=[4096,1,1,1]):   9487 runs -   9.58 us/run -   9216 kB/run
device: NVIDIA H100 80GB HBM3 (path: coopmat; tuning row nvidia)
mode: full; GGUF Q6_K blocks in their native bytes, f32 activations; medians of timestamp pairs; m > 8: rel. err of 3 tokens

| N × K | m | path | cold µs | cold GB/s | % of copy | hot µs | rel. err |
| --- | --- | --- | --- | --- | --- | --- | --- |
| 4096 × 4096 | 1 | coopmat | 14.5 | 954 | 32% | 13.2 | 1.1e-7 |
| N × K | blob MiB | from blob ms | from blob MiB/s | plain copy ms | plain copy MiB/s | from blob / plain copy | from Q4 data ms |
| --- | --- | --- | --- | --- | --- | --- | --- |
| 4096 × 4096 | 8.5 | 9.07 | 937 | 7.12 | 1193 | 0.79 | 23.22 |
"""

SAMPLE_EXPECTED = [
    {"commit": "abc1234", "date": "2026-12-03", "device": "NVIDIA H200", "driver": "580.159.04",
     "shape": {"n": 28672, "k": 8192}, "m": 1, "type": "g32", "x": "f16", "path": "coopmat 2×4",
     "us": 54.5, "gbps": 2698.0, "peer": [], "hot_us": 54.5, "rel_err": 1.5e-7,
     "source": "sample-2026-12-03.txt:9"},
    {"commit": "abc1234", "date": "2026-12-03", "device": "NVIDIA H200", "driver": "580.159.04",
     "shape": {"n": 28672, "k": 8192}, "m": 64, "type": "g32", "x": "f16",
     "path": "coopmat GEMM [rule] x-fragments", "us": 146.4, "gbps": 1060.0,
     "peer": [{"name": "llama.cpp Vulkan Q4_0", "us": 463.67}, {"name": "cuBLAS fp16", "us": 137.9}],
     "hot_us": 145.4, "rel_err": 2.9e-7, "tile": "2,4,64,1,4,1", "source": "sample-2026-12-03.txt:10"},
    {"commit": "abc1234", "date": "2026-12-03", "device": "NVIDIA H200", "driver": "580.159.04",
     "shape": {"n": 8192, "k": 28672}, "m": 64, "type": "g32", "x": "f16",
     "path": "coopmat GEMM [rule] x-fragments", "us": 171.6, "gbps": 889.0, "peer": [],
     "hot_us": 171.6, "rel_err": 2.7e-7, "tile": "4,4,32,1,2,1", "slices": 4,
     "source": "sample-2026-12-03.txt:11"},
]

# Lines as q4vk-bench --jsonl writes them (src/bin/q4vk-bench/jsonl.rs, whose tests check
# that it writes these very texts): SAMPLE_TABLE's last case, and escapes and nulls.
BENCH_LINES = [
    r'{"commit": "abc1234", "date": "2026-12-03", "device": "NVIDIA H200", "driver": "580.159.04", "shape": {"n": 8192, "k": 28672}, "m": 64, "type": "g32", "x": "f16", "path": "coopmat GEMM [rule] x-fragments", "us": 171.6, "gbps": 889.04, "peer": [], "hot_us": 171.55, "rel_err": 2.70e-7, "tile": "4,4,32,1,2,1", "slices": 4}',
    r'{"commit": null, "date": "2026-12-03", "device": "dev \"q\" \\ \u0001\t\n×", "driver": null, "shape": {"n": 32, "k": 75}, "m": 1, "type": "g32", "x": "f16", "path": "coopmat 2×4", "us": 5.0, "gbps": null, "peer": [], "hot_us": 4.123, "rel_err": null}',
]


def half_unit(value):
    """Half a unit in the last digit a table printed of a number read back (2698.0 was
    printed 2698, 1.5e-07 was 1.5e-7)."""
    mantissa, _, exp = repr(value).partition("e")
    places = 0 if mantissa.endswith(".0") or "." not in mantissa else len(mantissa.split(".")[1])
    return 0.5 * 10.0 ** (int(exp or 0) - places)


def agrees(bench, converted):
    """Whether a q4vk-bench line says what the converter read from the same row: the same
    keys (but source) and values, numbers within the table's rounding."""
    if set(bench) != set(converted) - {"source"}:
        return False
    for key, want in converted.items():
        got = bench.get(key)
        if key == "source":
            continue
        if isinstance(want, float) and isinstance(got, (int, float)):
            if abs(got - want) > half_unit(want) * (1 + 1e-9):
                return False
        elif got != want:
            return False
    return True


SAMPLE_A = [
    {"device": "D", "shape": {"n": 4096, "k": 4096}, "m": 1, "type": "g128", "x": "f32",
     "path": "coopmat 2×16", "us": 10.0},
    {"device": "D", "shape": {"n": 4096, "k": 4096}, "m": 8, "type": "g128", "x": "f32",
     "path": "coopmat GEMM [rule] x-fragments", "us": 20.0},
    {"device": "D", "shape": {"n": 4096, "k": 4096}, "m": 64, "type": "g128", "x": "f32",
     "path": "coopmat GEMM [rule] x-fragments", "us": 40.0},
    {"device": "D", "shape": {"n": 1, "k": 32}, "m": 1, "type": "g32", "x": "f16",
     "path": "subgroup", "us": 1.0},
]
SAMPLE_B = [
    {"device": "D", "shape": {"n": 4096, "k": 4096}, "m": 1, "type": "g128", "x": "f32",
     "path": "coopmat 2×16", "us": 10.2},
    {"device": "D", "shape": {"n": 4096, "k": 4096}, "m": 8, "type": "g128", "x": "f32",
     "path": "coopmat GEMM [rule] x-fragments", "us": 25.0},
    {"device": "D", "shape": {"n": 4096, "k": 4096}, "m": 64, "type": "g128", "x": "f32",
     "path": "coopmat GEMM [rule] x-fragments", "us": 30.0},
]


def self_test():
    failures = []

    def check(what, got, want):
        if got != want:
            failures.append("%s:\n  got  %r\n  want %r" % (what, got, want))

    got = from_table(SAMPLE_TABLE, name="sample-2026-12-03.txt", commit="abc1234")
    check("row count", len(got), len(SAMPLE_EXPECTED))
    for i, (g, w) in enumerate(zip(got, SAMPLE_EXPECTED)):
        check("row %d" % i, g, w)
    gguf = from_table(SAMPLE_GGUF, name="sample-gguf-2026-12-07.txt")
    check("GGUF rows (the load table skipped)", len(gguf), 1)
    check("GGUF type and its own peer", (gguf[0]["type"], gguf[0]["peer"]),
          ("Q6_K", [{"name": "llama.cpp Q6_K", "us": 9.37}]))
    # Round trip through JSON lines and the comparison.
    with tempfile.TemporaryDirectory() as tmp:
        pa, pb = os.path.join(tmp, "a.jsonl"), os.path.join(tmp, "b.jsonl")
        for path, objs in ((pa, SAMPLE_A), (pb, SAMPLE_B)):
            with open(path, "w", encoding="utf-8") as f:
                for o in objs:
                    f.write(json.dumps(o, ensure_ascii=False) + "\n")
        a, _ = load_jsonl(pa)
        b, _ = load_jsonl(pb)
        lines = compare(a, b, 0.05)
    check("compare line count", len(lines), 5)
    body = [l.split() for l in lines[1:4]]
    check("m=1 ratio, no flag", (body[0][-1], body[0][3]), ("1.020", "m=1"))
    check("m=8 slower", (body[1][3], body[1][-2], body[1][-1]), ("m=8", "1.250", "slower"))
    check("m=64 faster", (body[2][3], body[2][-2], body[2][-1]), ("m=64", "0.750", "faster"))
    check("summary", lines[-1],
          "3 cases in both (1 slower, 1 faster beyond ±0.05); 1 only in A, 0 only in B")
    # q4vk-bench's own lines: read by the comparer, joined with the converter's cases.
    bench = [json.loads(l) for l in BENCH_LINES]
    check("bench line agrees with the converted row", agrees(bench[0], got[2]), True)
    check("escapes", bench[1]["device"], 'dev "q" \\ \x01\t\n×')
    with tempfile.TemporaryDirectory() as tmp:
        pa, pb = os.path.join(tmp, "table.jsonl"), os.path.join(tmp, "bench.jsonl")
        with open(pa, "w", encoding="utf-8") as f:
            for o in got:
                f.write(json.dumps(o, ensure_ascii=False) + "\n")
        with open(pb, "w", encoding="utf-8") as f:
            f.write("\n".join(BENCH_LINES) + "\n")
        joined = compare(load_jsonl(pa)[0], load_jsonl(pb)[0], 0.05)
    check("bench lines compared", joined[-1],
          "1 cases in both (0 slower, 0 faster beyond ±0.05); 2 only in A, 1 only in B")
    # A device name with parentheses of its own (lavapipe) is kept whole, as q4vk-bench
    # writes it.
    lvp = from_table(
        "device: llvmpipe (LLVM 15.0.6, 256 bits) (path: subgroup; SIMT kernels: workgroup 128)\n"
        "mode: quick (N/4, K/4); group 128, symmetric, f16 scales, f32 activations; medians\n"
        "| N × K | m | path | cold µs |\n| --- | --- | --- | --- |\n"
        "| 128 × 256 | 1 | subgroup | 134.1 |\n", name="lvp.txt")
    check("device with parentheses", lvp[0]["device"], "llvmpipe (LLVM 15.0.6, 256 bits)")
    # A table without a q4vk-bench header is refused with a reason.
    try:
        from_table("| 4096 × 4096 | 1 | 8.0 |\n", name="bad.txt")
        failures.append("a row without a header was accepted")
    except TableError as e:
        check("refusal names the line", str(e).startswith("bad.txt:1: "), True)
    try:
        from_table("| N × K | m | µs |\n| --- | --- | --- |\n| 1 × 2 | 1 | 3.0 |\n", name="bad.txt")
        failures.append("a header without 'cold µs' was accepted")
    except TableError as e:
        check("refusal names the column", "'cold µs'" in str(e), True)
    if failures:
        print("self-test FAILED:\n" + "\n".join(failures), file=sys.stderr)
        return 1
    print("self-test passed (%d rows parsed, %d cases compared, %d q4vk-bench lines read, "
          "2 bad tables refused)" % (len(got), 3, len(BENCH_LINES)))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", metavar="FILE", help="A.jsonl B.jsonl to compare")
    ap.add_argument("--threshold", type=float, default=0.05,
                    help="flag B/A beyond 1 ± this as slower / faster (default 0.05)")
    ap.add_argument("--from-table", metavar="RAW.txt",
                    help="convert a raw q4vk-bench output to JSON lines on stdout")
    ap.add_argument("--commit", help="the build's commit (else 'build <hash>' in the file)")
    ap.add_argument("--date", help="YYYY-MM-DD (else the first date in the file name or head)")
    ap.add_argument("--device", help="device name (else the file's device line)")
    ap.add_argument("--driver", help="driver version (else the file's nvidia-smi or comment line)")
    ap.add_argument("--type", dest="type_", metavar="TYPE",
                    help="weight form, e.g. g128, g32-offsets, g128-act-order (else the mode line)")
    ap.add_argument("--x", choices=("f16", "f32"), help="activation type (else the mode line)")
    ap.add_argument("--self-test", action="store_true", help="run the embedded tests")
    args = ap.parse_args(argv)

    try:
        if args.self_test:
            return self_test()
        if args.from_table:
            if args.files:
                ap.error("--from-table takes one raw file and no JSON-lines files")
            with open(args.from_table, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for obj in from_table(text, name=args.from_table, commit=args.commit,
                                  date=args.date, device=args.device, driver=args.driver,
                                  type_=args.type_, x=args.x):
                print(json.dumps(obj, ensure_ascii=False))
            return 0
        if len(args.files) != 2:
            ap.error("give two JSON-lines files (A B), --from-table RAW.txt, or --self-test")
        (a, da), (b, db) = load_jsonl(args.files[0]), load_jsonl(args.files[1])
        for path, d in ((args.files[0], da), (args.files[1], db)):
            if d:
                print("note: %s repeats %d cases; the first of each is compared" % (path, d),
                      file=sys.stderr)
        print("A: %s\nB: %s" % tuple(args.files))
        print("\n".join(compare(a, b, args.threshold)))
        return 0
    except (TableError, OSError) as e:
        print("bench-compare: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
