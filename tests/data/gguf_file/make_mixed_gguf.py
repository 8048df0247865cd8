#!/usr/bin/env python3
"""Writes tests/data/gguf_file/mixed.gguf with gguf-py's GGUFWriter: a two-layer file whose
linear weights mix the types of a Q4_K_M or dynamic-quant download (Q4_K, Q5_K, Q6_K, Q8_0,
IQ4_XS, MXFP4, plus Q4_0, Q5_0, Q5_1, IQ4_NL, NVFP4), an F16 embedding and F32 norms.
Each quantized tensor holds the raw blocks of a golden case in tests/data/gguf-more or
tests/data/gguf, so its dequantized weights must equal that case's dequant file.
Needs gguf-py 0.19.0 (`pip install gguf==0.19.0`); the result is deterministic.
Usage: python3 tests/data/gguf_file/make_mixed_gguf.py"""
import os

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..")
Q = gguf.GGMLQuantizationType

# (tensor name, type, golden case under tests/data, rows, cols). The golden dequant file of
# each case is the reference the C test compares against (see examples_c/CMakeLists.txt).
LINEAR = [
    ("blk.0.attn_q.weight", Q.Q4_K, "gguf-more/q4_k_p_33x512_dq", 33, 512),
    ("blk.0.attn_k.weight", Q.Q5_K, "gguf-more/q5_k_p_7x1024_dq", 7, 1024),
    ("blk.0.attn_v.weight", Q.Q6_K, "gguf-more/q6_k_p_33x512_dq", 33, 512),
    ("blk.0.attn_output.weight", Q.Q8_0, "gguf-more/q8_0_p_33x512_q", 33, 512),
    ("blk.0.ffn_gate.weight", Q.IQ4_XS, "gguf-more/iq4_xs_p_33x512_dq", 33, 512),
    ("blk.0.ffn_up.weight", Q.MXFP4, "gguf-more/mxfp4_p_33x512_q", 33, 512),
    ("blk.0.ffn_down.weight", Q.Q6_K, "gguf-more/q6_k_p_7x1024_dq", 7, 1024),
    ("blk.1.attn_q.weight", Q.Q5_0, "gguf-more/q5_0_p_33x512_q", 33, 512),
    ("blk.1.attn_k.weight", Q.Q5_1, "gguf-more/q5_1_p_7x1024_q", 7, 1024),
    ("blk.1.attn_v.weight", Q.IQ4_NL, "gguf-more/iq4_nl_p_33x512_dq", 33, 512),
    ("blk.1.ffn_up.weight", Q.NVFP4, "gguf-more/nvfp4_p_33x512_dq", 33, 512),
    ("blk.1.ffn_down.weight", Q.Q4_0, "gguf/q4_0_mid_llm", 32, 256),
]


def raw_blocks(case, qtype, rows, cols):
    block, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    row_bytes = cols // block * block_bytes
    data = np.fromfile(os.path.join(DATA, case + ".quant.u8.bin"), dtype=np.uint8)
    assert data.size == rows * row_bytes, (case, data.size, rows * row_bytes)
    reference = np.fromfile(os.path.join(DATA, case + ".dequant.f32.bin"), dtype=np.float32)
    blocks = data.reshape(rows, row_bytes)
    # The golden file is gguf-py's own dequantization of these blocks.
    assert np.array_equal(gguf.quants.dequantize(blocks, qtype).reshape(-1).view(np.uint32),
                          reference.view(np.uint32)), case
    return blocks


def main():
    writer = gguf.GGUFWriter(os.path.join(HERE, "mixed.gguf"), "llama")
    writer.add_name("q4vk mixed-type test")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    writer.add_block_count(2)
    rng = np.random.default_rng(2026)
    writer.add_tensor("token_embd.weight", rng.standard_normal((16, 512)).astype(np.float16))
    for layer in range(2):
        writer.add_tensor("blk.%d.attn_norm.weight" % layer,
                          (1 + 0.1 * rng.standard_normal(512)).astype(np.float32))
    for name, qtype, case, rows, cols in LINEAR:
        writer.add_tensor(name, raw_blocks(case, qtype, rows, cols), raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print("mixed.gguf: %d bytes, %d tensors" % (os.path.getsize(os.path.join(HERE, "mixed.gguf")),
                                                 len(LINEAR) + 3))


if __name__ == "__main__":
    main()
