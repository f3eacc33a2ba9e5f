#!/usr/bin/env python3
# How far two engines' greedy continuations of one prompt agree, in our tokens: our `run --prompt`
# log (its generated ids) against llama-completion's output run with -sp (the prompt and then its
# continuation, special tokens printed). Our ids are spelled by `switchyard tokenize --ids`, which
# gives the text's length after each id, and the count is how many of them spell a start of
# llama.cpp's continuation. Encoding llama.cpp's text again would not do: repeated pieces encode
# differently from how they were generated ("私自私自" as other ids than 私自 twice).
#   greedy-agreement.py SWITCHYARD_BIN TOKENIZER OUR_RUN_LOG LLAMA_OUTPUT PROMPT
import json
import re
import subprocess
import sys

binary, tokenizer, ours_log, theirs_file, prompt = sys.argv[1:6]
ours_text = open(ours_log, encoding="utf-8", errors="replace").read()
found = re.search(r"^generated ids: ([0-9 ]*)$", ours_text, re.M)
if not found:
    sys.exit("greedy-agreement: no generated ids in " + ours_log)
ids = found.group(1).split()
theirs = open(theirs_file, "rb").read()
at = theirs.find(prompt.encode("utf-8"))
if at < 0:
    sys.exit("greedy-agreement: " + theirs_file + " does not hold the prompt")
theirs = theirs[at + len(prompt.encode("utf-8")):].rstrip(b"\n")
spelled = json.loads(subprocess.run([binary, "tokenize", "--tokenizer", tokenizer, "--ids", ",".join(ids), "--format",
                                     "json"], capture_output=True, text=True, check=True).stdout)
text = spelled["text"].encode("utf-8")
same = 0
while same < len(ids) and theirs.startswith(text[:spelled["token_ends"][same]]):
    same += 1
print("greedy agreement: our first %d of %d ids spell the start of llama.cpp's continuation; texts %s (ours %d bytes, "
      "llama.cpp's %d)" % (same, len(ids), "equal" if text == theirs else "differ", len(text), len(theirs)))
