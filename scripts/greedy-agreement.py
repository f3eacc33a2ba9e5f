#!/usr/bin/env python3
# How far two engines' greedy continuations of one prompt agree, in tokens of the model's own
# tokenizer: our `run --prompt` log against llama-completion's output (the prompt and then its
# continuation, special tokens not printed). Special tokens are dropped from ours too, then both
# texts are encoded by `switchyard tokenize` and their common start is counted.
#   greedy-agreement.py SWITCHYARD_BIN TOKENIZER OUR_RUN_LOG LLAMA_OUTPUT PROMPT
import json
import re
import subprocess
import sys

binary, tokenizer, ours_log, theirs_file, prompt = sys.argv[1:6]
ours_text = open(ours_log, encoding="utf-8", errors="replace").read()
found = re.search(r"^generated text: (.*?)\ngenerated ids: ([0-9 ]*)$", ours_text, re.S | re.M)
if not found:
    sys.exit("greedy-agreement: no generated text in " + ours_log)
ours = re.sub(r"<｜[^｜]*｜>", "", found.group(1))
theirs = open(theirs_file, encoding="utf-8", errors="replace").read()
if not theirs.startswith(prompt):
    sys.exit("greedy-agreement: " + theirs_file + " does not start with the prompt")
theirs = theirs[len(prompt):].rstrip("\n")


def ids(text):
    out = subprocess.run([binary, "tokenize", "--tokenizer", tokenizer, "--prompt", text, "--add_special", "false",
                          "--format", "json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["ids"]


a, b = ids(ours), ids(theirs)
same = 0
while same < min(len(a), len(b)) and a[same] == b[same]:
    same += 1
print("greedy agreement: the first %d of %d tokens (ours %d, llama.cpp %d, special tokens left out)"
      % (same, max(len(a), len(b)), len(a), len(b)))
