#!/usr/bin/env python3
"""Writes tests/data/gguf_file/small.gguf: a GGUF v3 file laid out as gguf-py's GGUFWriter
writes it (header, metadata, tensor infos, zero padding to the alignment, then each
tensor's data padded to the alignment), with the raw blocks of golden cases from
tests/data/gguf as its quantized tensors. Standard library only; deterministic.
Usage: python3 tests/data/gguf_file/make_gguf.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "gguf")
ALIGNMENT = 64

# GGUF metadata value types and ggml tensor types (ids from the GGUF specification).
UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64 = 4, 5, 6, 7, 8, 9, 10
F32, Q4_0, Q4_1, Q4_K = 0, 2, 3, 12


def gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STRING:
        return gguf_string(v)
    if vtype == ARRAY:
        item_type, items = v
        return struct.pack("<IQ", item_type, len(items)) + b"".join(value(item_type, x) for x in items)
    fmt = {UINT32: "<I", INT32: "<i", FLOAT32: "<f", BOOL: "<?", UINT64: "<Q"}[vtype]
    return struct.pack(fmt, v)


def blocks(case, size):
    """The first `size` bytes (whole rows) of a golden case's raw blocks."""
    with open(os.path.join(GOLDEN, case + ".quant.u8.bin"), "rb") as f:
        data = f.read()
    assert len(data) >= size
    return data[:size]


def pad(n):
    return (ALIGNMENT - n % ALIGNMENT) % ALIGNMENT


def main():
    metadata = [
        ("general.architecture", STRING, "llama"),
        ("general.name", STRING, "q4vk gguf reader test"),
        ("general.alignment", UINT32, ALIGNMENT),
        ("general.file_type", UINT32, 15),
        ("test.float", FLOAT32, 0.5),
        ("test.flag", BOOL, True),
        ("test.count", UINT64, 3),
        ("test.ints", ARRAY, (INT32, [1, -2, 3, -4, 5])),
        ("test.words", ARRAY, (STRING, ["alpha", "", "gamma"])),
        ("test.nested", ARRAY, (ARRAY, [(UINT32, [7, 8]), (STRING, ["x"])])),
    ]
    # (name, ggml type, dims ne0 first, data). Row r of a golden case is ggml row r.
    q4_0 = blocks("q4_0_mid_llm", 8 * (256 // 32) * 18)  # [32][256] -> first 8 rows
    q4_1 = blocks("q4_1_small_uniform", 4 * (64 // 32) * 20)  # [4][64], whole
    q4_k = blocks("q4_k_dequant_random", 4 * (512 // 256) * 144)  # [4][512], whole
    f32 = b"".join(struct.pack("<f", (i - 6) * 0.25) for i in range(2 * 6))
    tensors = [
        ("blk.0.attn_q.weight", Q4_0, [256, 8], q4_0),
        ("blk.0.ffn_up.weight", Q4_K, [512, 4], q4_k),
        ("blk.0.attn_norm.weight", F32, [6, 2], f32),
        ("blk.0.ffn_down.weight", Q4_1, [64, 4], q4_1),
    ]

    out = bytearray(b"GGUF")
    out += struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, vtype, v in metadata:
        out += gguf_string(key) + struct.pack("<I", vtype) + value(vtype, v)
    offset = 0
    for name, ttype, dims, data in tensors:
        out += gguf_string(name) + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ttype, offset)
        offset += len(data) + pad(len(data))
    out += bytes(pad(len(out)))
    for _, _, _, data in tensors:
        out += data + bytes(pad(len(data)))
    with open(os.path.join(HERE, "small.gguf"), "wb") as f:
        f.write(out)
    print("small.gguf: %d bytes, %d tensors, %d metadata entries" % (len(out), len(tensors), len(metadata)))


if __name__ == "__main__":
    main()
