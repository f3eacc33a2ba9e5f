#!/usr/bin/env python3
"""Random blocks of ggml's IQ types and MXFP4 decoded by llama.cpp's own Python reader (gguf-py), for
the test "quant formats: random IQ and MXFP4 blocks decode to gguf-py's values"
(tests/core/test_quant_formats.cpp). Random bytes reach every grid point and sign pattern, which a
quantised file's blocks need not; the scales are set to finite values as quant::set_block_scales
does (a half float d; MXFP4's exponent byte; IQ1_M's d spread over its scale words).

  PYTHONPATH=/path/to/llama.cpp/gguf-py /usr/bin/python3 scripts/quant-random-fixtures.py OUT_DIR

Writes OUT_DIR/<type>.blocks (the raw blocks), OUT_DIR/<type>.f32 (gguf-py's values, little-endian
float32) and OUT_DIR/manifest.json [{"type", "ggml_type", "blocks", "columns", "values"}] (one row of
`columns` weights per type)."""
import json
import os
import sys

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(20261206)
manifest = []
for name in ["IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "IQ4_NL", "IQ4_XS", "MXFP4"]:
    qtype = GGMLQuantizationType[name]
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    count = 4096 // block_size  # 4096 weights a type
    raw = rng.integers(0, 256, size=(count, type_size), dtype=np.uint8)
    d = (rng.uniform(-1.5, 1.5, size=count) / 64).astype(np.float16).view(np.uint16)
    if name == "MXFP4":
        raw[:, 0] = rng.integers(100, 140, size=count)
    elif name == "IQ1_M":  # d's four nibbles are the top nibbles of the scale words (bytes 48-55)
        words = raw[:, 48:56].copy().view(np.uint16)
        for i in range(4):
            words[:, i] = (words[:, i] & 0x0FFF) | (((d >> (4 * i)) & 0xF) << 12)
        raw[:, 48:56] = words.view(np.uint8)
    else:  # d first
        raw[:, 0:2] = d.view(np.uint8).reshape(count, 2)
    values = dequantize(raw.reshape(1, -1), qtype).astype(np.float32).reshape(-1)
    assert np.all(np.isfinite(values)) and np.any(values != 0)
    stem = name.lower()
    raw.tofile(os.path.join(out, stem + ".blocks"))
    values.tofile(os.path.join(out, stem + ".f32"))
    manifest.append({"type": name, "ggml_type": int(qtype), "blocks": stem + ".blocks", "columns": int(values.size),
                     "values": stem + ".f32"})
with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
print("quant-random-fixtures:", ", ".join(m["type"] for m in manifest))
