#!/usr/bin/env python3
"""Drops the source text and line information from SPIR-V modules compiled with -g
(OpSource, OpSourceContinued, OpString, OpLine, OpNoLine, OpModuleProcessed), keeping the
names (OpName, OpMemberName) that hosts such as ncnn read. Usage: strip-spirv-lines.py
FILE...; each file is rewritten in place."""
import struct
import sys

DROPPED = {2, 3, 7, 8, 317, 330}


def strip(words):
    out = list(words[:5])
    i = 5
    while i < len(words):
        count = words[i] >> 16
        if count == 0 or i + count > len(words):
            raise ValueError("malformed SPIR-V instruction at word %d" % i)
        if words[i] & 0xFFFF not in DROPPED:
            out.extend(words[i:i + count])
        i += count
    return out


for path in sys.argv[1:]:
    with open(path, "rb") as f:
        data = f.read()
    words = struct.unpack("<%dI" % (len(data) // 4), data)
    if words[0] != 0x07230203:
        sys.exit("%s: not little-endian SPIR-V" % path)
    kept = strip(words)
    with open(path, "wb") as f:
        f.write(struct.pack("<%dI" % len(kept), *kept))
