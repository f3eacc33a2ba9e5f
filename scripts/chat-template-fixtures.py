#!/usr/bin/env python3
# On the GPU machine (transformers is there): renders the chat templates of the real tokenizers in
# .tokenizers/ with transformers' apply_chat_template on a set of conversations, and writes what it
# rendered as the fixtures tests/text/test_chat_template.cpp compares with, character for character.
#   python3 scripts/chat-template-fixtures.py OUT_DIR
import json
import os
import sys

import transformers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".tokenizers")
out_dir = sys.argv[1]
os.makedirs(out_dir, exist_ok=True)

weather_tool = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
cases = [
    ("one user turn", [{"role": "user", "content": "Hello!"}], None, True, {}),
    ("system and turns", [{"role": "system", "content": "You are a helpful assistant."},
                          {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."},
                          {"role": "user", "content": "And 3+3? 你好 🙂\n  spaced  "}], None, True, {}),
    ("no generation prompt", [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                              {"role": "assistant", "content": "Hello."}], None, False, {}),
    ("two system messages", [{"role": "system", "content": "First."}, {"role": "system", "content": "Second."},
                             {"role": "user", "content": "Go"}], None, True, {}),
    ("thinking in history", [{"role": "user", "content": "Hi"},
                             {"role": "assistant", "content": "<think>\nThe user greets.\n</think>\n\nHello! How can I help?"},
                             {"role": "user", "content": "Tell me a joke."}], None, True, {}),
    ("thinking off", [{"role": "user", "content": "Hello!"}], None, True, {"enable_thinking": False}),
    ("thinking on", [{"role": "user", "content": "Hello!"}], None, True, {"enable_thinking": True}),
    ("tool call, arguments as text", [{"role": "user", "content": "Weather in Paris?"},
                                      {"role": "assistant", "content": None, "tool_calls": [
                                          {"type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
                                      {"role": "tool", "content": "{\"temp\": 18}"},
                                      {"role": "assistant", "content": "It is 18 degrees."}], None, True, {}),
    ("tools offered, call with object arguments", [{"role": "system", "content": "Use tools."},
                                                   {"role": "user", "content": "Weather in Paris and Rome?"},
                                                   {"role": "assistant", "content": "", "tool_calls": [
                                                       {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                                                       {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
                                                   {"role": "tool", "content": "{\"temp\": 18}"},
                                                   {"role": "tool", "content": "{\"temp\": 24}"}], [weather_tool], True, {}),
]

for package in sorted(os.listdir(root)):
    directory = os.path.join(root, package)
    config = json.load(open(os.path.join(directory, "tokenizer_config.json")))
    try:
        tokenizer = AutoTokenizer.from_pretrained(directory)
        how = "AutoTokenizer"
    except Exception as e:  # noqa: BLE001
        tokenizer = PreTrainedTokenizerFast(tokenizer_file=os.path.join(directory, "tokenizer.json"))
        tokenizer.chat_template = config["chat_template"]
        how = "PreTrainedTokenizerFast (%s)" % e
    rendered = []
    for name, messages, tools, generation, kwargs in cases:
        entry = {"name": name, "messages": messages, "tools": tools, "add_generation_prompt": generation, "kwargs": kwargs}
        try:
            entry["text"] = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False,
                                                          add_generation_prompt=generation, **kwargs)
        except Exception as e:  # noqa: BLE001
            entry["error"] = "%s: %s" % (type(e).__name__, e)
        rendered.append(entry)
    json.dump({"tokenizer": package, "transformers_version": transformers.__version__, "loaded_with": how,
               "bos_token": tokenizer.bos_token, "eos_token": tokenizer.eos_token, "cases": rendered},
              open(os.path.join(out_dir, package + ".json"), "w"), ensure_ascii=False, indent=1)
    print(package, how, sum("text" in c for c in rendered), "rendered,", sum("error" in c for c in rendered), "errors")
