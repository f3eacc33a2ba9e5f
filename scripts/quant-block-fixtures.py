#!/usr/bin/env python3
"""Blocks of ggml's IQ types and MXFP4 as llama.cpp's own quantizer (llama-quantize, with an
importance matrix from llama-imatrix) writes them, beside the values llama.cpp's Python reader
(gguf-py) decodes them to. Random blocks (scripts/quant-random-fixtures.py) reach every grid point;
these are the blocks a real quantizer picks: its scales, its choice of grid points and signs, its
row layout, in a real file. scripts/quant-block-fixtures.sh makes the files and runs this.

  PYTHONPATH=/path/to/llama.cpp/gguf-py /usr/bin/python3 scripts/quant-block-fixtures.py QUANT_DIR [OUT_DIR]
  PYTHONPATH=/path/to/llama.cpp/gguf-py /usr/bin/python3 scripts/quant-block-fixtures.py --check [OUT_DIR]

QUANT_DIR holds llama-quantize's outputs, one a type: <TYPE>.gguf for the IQ types (IQ2_S.gguf is
llama-quantize's IQ2_M recipe with --pure: its IQ2_S recipe stores IQ2_XS) and MXFP4_MOE.gguf for
MXFP4. OUT_DIR (default tests/fixtures/quant_blocks) gets, per type, one tensor's first rows
(an expert tensor where the type has one, else attention; rows of whole 256-weight super-blocks;
at most 4096 weights, 16 KB of values):
  <type>.blocks  the raw blocks, byte for byte as the file stores them (rows x row_bytes)
  <type>.f32     gguf-py's dequantized values, little-endian float32 (rows x columns)
  manifest.json  [{"type", "ggml_type", "tensor", "tensor_shape", "source", "rows", "columns",
                   "row_bytes", "blocks", "values"}]; tensor_shape is ggml's ne, columns first.
Other files in OUT_DIR (random/) are left alone. Each type is checked as it is written, and --check
checks a written OUT_DIR without the GGUF files: the values finite and not all zero, the blocks
the right size, and gguf-py decoding the .blocks file to the .f32 file bit for bit."""
import collections
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize

TYPES = ["IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_XS", "IQ4_NL", "MXFP4"]
SOURCES = {name: f"{name}.gguf" for name in TYPES} | {"MXFP4": "MXFP4_MOE.gguf"}
MAX_VALUES = 4096  # weights a type: 16 KB of float32


def check(entry, out):
    """Decodes the .blocks file again and compares with the .f32 file; returns the values."""
    qtype = GGMLQuantizationType[entry["type"]]
    assert int(qtype) == entry["ggml_type"], entry
    block_size, type_size = GGML_QUANT_SIZES[qtype]
    rows, columns, row_bytes = entry["rows"], entry["columns"], entry["row_bytes"]
    assert columns % block_size == 0 and row_bytes == columns // block_size * type_size, entry
    blocks = np.fromfile(os.path.join(out, entry["blocks"]), dtype=np.uint8)
    values = np.fromfile(os.path.join(out, entry["values"]), dtype="<f4")
    assert blocks.size == rows * row_bytes, (entry["type"], blocks.size)
    assert values.size == rows * columns, (entry["type"], values.size)
    assert np.all(np.isfinite(values)), entry["type"]
    assert np.any(values != 0), entry["type"]
    again = dequantize(blocks.reshape(rows, row_bytes), qtype).astype("<f4").reshape(-1)
    assert np.array_equal(again.view(np.uint32), values.view(np.uint32)), entry["type"]
    return values


def check_dir(out):
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    assert sorted(e["type"] for e in manifest) == sorted(TYPES), [e["type"] for e in manifest]
    for entry in manifest:
        values = check(entry, out)
        print(f"  {entry['type']:8} {entry['tensor']} {entry['rows']}x{entry['columns']}: decodes to its values,"
              f" |v| max {np.abs(values).max():.4g}, {np.count_nonzero(values)} of {values.size} nonzero")
    print(f"quant-block-fixtures: {out}: {len(manifest)} types check")


def pick(reader, qtype):
    """The type's tensor of whole 256-weight rows: an expert tensor first, then attention, then any."""
    tensors = [t for t in reader.tensors if t.tensor_type == qtype and int(t.shape[0]) % 256 == 0]
    for wanted in ("_exps.", "attn_", ""):
        for t in tensors:
            if wanted in t.name:
                return t
    return None


def write(quant_dir, out):
    os.makedirs(out, exist_ok=True)
    manifest = []
    for name in TYPES:
        qtype = GGMLQuantizationType[name]
        path = os.path.join(quant_dir, SOURCES[name])
        reader = GGUFReader(path)
        census = collections.Counter(t.tensor_type.name for t in reader.tensors)
        print(f"{SOURCES[name]}: " + ", ".join(f"{k} x{v}" for k, v in sorted(census.items())))
        tensor = pick(reader, qtype)
        if tensor is None:
            sys.exit(f"quant-block-fixtures: {path} has no {name} tensor of whole 256-weight rows")
        columns = int(tensor.shape[0])  # ne[0]: the contiguous dimension
        data = np.asarray(tensor.data)  # uint8, one row of blocks in the last dimension
        row_bytes = data.shape[-1]
        flat = data.reshape(-1, row_bytes)
        rows = min(flat.shape[0], max(1, MAX_VALUES // columns))
        raw = flat[:rows].tobytes()
        # The bytes are the file's own: tensor.data is a view of the file at the tensor's offset.
        with open(path, "rb") as f:
            f.seek(tensor.data_offset)
            assert f.read(len(raw)) == raw, name
        values = dequantize(flat[:rows], qtype).astype("<f4").reshape(rows, columns)
        entry = {"type": name, "ggml_type": int(qtype), "tensor": tensor.name,
                 "tensor_shape": [int(n) for n in tensor.shape], "source": os.path.basename(path),
                 "rows": rows, "columns": columns, "row_bytes": int(row_bytes),
                 "blocks": f"{name.lower()}.blocks", "values": f"{name.lower()}.f32"}
        with open(os.path.join(out, entry["blocks"]), "wb") as f:
            f.write(raw)
        values.tofile(os.path.join(out, entry["values"]))
        check(entry, out)
        manifest.append(entry)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        f.write("[\n" + ",\n".join(" " + json.dumps(e) for e in manifest) + "\n]\n")  # an entry a line
    print("quant-block-fixtures:", ", ".join(f"{e['type']} {e['tensor']} {e['rows']}x{e['columns']}"
                                            for e in manifest))


if __name__ == "__main__":
    default_out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "quant_blocks")
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        sys.exit(__doc__)
    if args[0] == "--check":
        check_dir(os.path.normpath(args[1] if len(args) > 1 else default_out))
    else:
        write(args[0], os.path.normpath(args[1] if len(args) > 1 else default_out))
