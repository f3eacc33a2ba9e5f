#!/usr/bin/env python3
"""Dequantizes rows of a GGUF file's tensors with gguf-py (llama.cpp's own Python reader, an
implementation of the block formats independent of ours) and writes them for the test
"gguf peer" (tests/core/test_gguf_peer.cpp), which decodes the same rows with core/quant_formats.h.

  PYTHONPATH=/tmp/lcpp-src/gguf-py scripts/gguf-peer-values.py FILE.gguf OUT_DIR [ROWS]

For every quantised type in the file, up to two tensors, their first ROWS rows (default 16):
OUT_DIR/<n>.f32 (little-endian float32, rows x columns) and OUT_DIR/manifest.json
[{"file", "tensor", "type", "rows", "columns", "values"}]."""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

path, out = sys.argv[1], sys.argv[2]
rows_wanted = int(sys.argv[3]) if len(sys.argv) > 3 else 16
os.makedirs(out, exist_ok=True)
reader = GGUFReader(path)
taken = {}
manifest = []
for tensor in reader.tensors:
    qtype = tensor.tensor_type
    if qtype.name in ("F32",) or taken.get(qtype.name, 0) >= 2:
        continue
    columns = int(tensor.shape[0])  # ne[0]: the contiguous dimension
    data = np.asarray(tensor.data)
    flat = data.reshape(-1, data.shape[-1])  # one row of bytes (or elements) per weight row
    rows = min(rows_wanted, flat.shape[0])
    values = dequantize(flat[:rows], qtype).astype(np.float32).reshape(rows, columns)
    name = f"{len(manifest)}.f32"
    values.tofile(os.path.join(out, name))
    manifest.append({"file": os.path.abspath(path), "tensor": tensor.name, "type": qtype.name, "rows": rows,
                     "columns": columns, "values": name})
    taken[qtype.name] = taken.get(qtype.name, 0) + 1
with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
print("gguf-peer-values:", ", ".join(f"{m['type']} {m['tensor']}" for m in manifest))
