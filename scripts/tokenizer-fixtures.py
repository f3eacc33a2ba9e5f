"""On the GPU machine: the expected ids of tests/fixtures/tokenizers/corpus.json from HF `tokenizers`.

usage: python3 scripts/tokenizer-fixtures.py CORPUS OUT_DIR NAME=TOKENIZER_JSON ...
Writes OUT_DIR/NAME.json: per text, the ids and tokens of encode(text) (add_special_tokens=True,
the library's default) and the ids of encode(text, add_special_tokens=False), and decode(ids).
`tokenizers` itself is the reference: transformers' AutoTokenizer rebuilds some of these files
differently (DeepSeek-V3's as a Llama tokenizer).
"""
import json
import sys

import tokenizers

corpus = json.load(open(sys.argv[1], encoding="utf-8"))
for spec in sys.argv[3:]:
    name, path = spec.split("=", 1)
    t = tokenizers.Tokenizer.from_file(path)
    entries = []
    for text in corpus:
        e = t.encode(text)
        plain = t.encode(text, add_special_tokens=False)
        entries.append({"text": text, "ids": e.ids, "tokens": e.tokens, "ids_plain": plain.ids,
                        "decoded": t.decode(e.ids, skip_special_tokens=False)})
    with open(f"{sys.argv[2]}/{name}.json", "w", encoding="utf-8") as f:
        json.dump({"tokenizer": name, "tokenizers_version": tokenizers.__version__, "entries": entries}, f,
                  ensure_ascii=False, indent=0)
    print(name, len(entries), "texts,", sum(len(x["ids"]) for x in entries), "ids")
