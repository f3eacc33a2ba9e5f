"""On the GPU machine: what HF `tokenizers` splits the test corpus into with each pre-tokenizer
family that a GGUF's tokenizer.ggml.pre names (text/gguf_vocabulary.cpp).

usage: python3 scripts/pre-tokenizer-fixtures.py CORPUS REFERENCES OUT NAME=TOKENIZER_JSON ...
REFERENCES: tests/fixtures/tokenizers/pre_tokenizer_references.json, the families' pre-tokenizers
as their models' files spell them; NAME=TOKENIZER_JSON adds a family from a real tokenizer.json.
Writes OUT: per family, its pre_tokenizer and, per corpus text, the pieces (text, in order) that
its Split steps leave. The trailing ByteLevel step (use_regex false) splits nothing and is left out,
so the pieces are text rather than byte-level spellings.
"""
import json
import sys

import tokenizers

corpus = json.load(open(sys.argv[1], encoding="utf-8"))
references = {k: v for k, v in json.load(open(sys.argv[2], encoding="utf-8")).items() if not k.startswith("_")}
for spec in sys.argv[4:]:
    name, path = spec.split("=", 1)
    references[name] = json.load(open(path, encoding="utf-8"))["pre_tokenizer"]


def splits_only(pre):
    steps = pre["pretokenizers"] if pre["type"] == "Sequence" else [pre]
    for s in steps:
        assert s["type"] == "Split" or (s["type"] == "ByteLevel" and not s["use_regex"]), s
    return {"type": "Sequence", "pretokenizers": [s for s in steps if s["type"] == "Split"]}


out = {"tokenizers_version": tokenizers.__version__, "families": {}}
for name, pre in sorted(references.items()):
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
           "pre_tokenizer": splits_only(pre), "post_processor": None, "decoder": None,
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": {}, "merges": []}}
    t = tokenizers.Tokenizer.from_str(json.dumps(doc))
    pieces = [[p for p, _ in t.pre_tokenizer.pre_tokenize_str(text)] for text in corpus]
    out["families"][name] = {"pre_tokenizer": pre, "pieces": pieces}
    print(name, sum(len(p) for p in pieces), "pieces")
with open(sys.argv[3], "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=0)
