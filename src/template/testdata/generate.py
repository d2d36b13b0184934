#!/usr/bin/python3
"""Regenerates the golden outputs of src/template/template_golden_test.cc with the real Jinja2.

Run with Debian's Python, which has python3-jinja2 (apt-get install -y python3-jinja2):

    /usr/bin/python3 src/template/testdata/generate.py

Every *.jinja here is a chat template copied verbatim from a public model repository. Each is rendered the
way HF transformers' apply_chat_template renders it (an ImmutableSandboxedEnvironment with trim_blocks and
lstrip_blocks, the loopcontrols extension, a tojson that does not HTML-escape, raise_exception and
strftime_now) for each conversation in CONVERSATIONS, and the result is written to

    <template>.<conversation>.<gen|nogen>.expected   the exact output bytes, or
    <template>.<conversation>.<gen|nogen>.error      "raise\\n<message>" when the template called
                                                     raise_exception, "error\\n<message>" for any other failure.

conversations.json (read by the C++ test as nlohmann::ordered_json) holds the same contexts, keys in the
order written here, which is the order Python iterates them in (dict.items(), tojson).
"""

import datetime
import glob
import json
import os
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}]

# name -> (context fields other than add_generation_prompt, whether to render without the generation prompt)
CONVERSATIONS = {
    "basic": ({
        "messages": [
            {"role": "user", "content": "Hello!"},
            {"role": "assistant", "content": "  Hi there! How can I help?  "},
            {"role": "user", "content": "What's 2 + 2? Answer in \u00abone\u00bb word \U0001F600."},
        ],
    }, True),
    "system": ({
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Hello!"},
            {"role": "assistant", "content": "Hi there!\nHow can I help?"},
            {"role": "user", "content": "Tell me a joke."},
        ],
    }, True),
    "tools": ({
        "tools": TOOLS,
        "messages": [
            {"role": "system", "content": "You can call tools."},
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [{
                "id": "call12345", "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
            }]},
            {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temp\": 21}"},
            {"role": "assistant", "content": "<think>\nThe tool said 21.\n</think>\n\nIt is 21 degrees."},
            {"role": "user", "content": "Thanks!"},
        ],
    }, False),
}

COMMON = {
    "bos_token": "<s>",
    "eos_token": "</s>",
    "tools": None,
    "documents": None,
    # Llama 3.x templates read today's date through strftime_now unless date_string is given.
    "date_string": "26 Jul 2024",
}


class Raised(jinja2.exceptions.TemplateError):
    pass


def raise_exception(message):
    raise Raised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    env = make_env()
    contexts = {}
    for name, (fields, _) in CONVERSATIONS.items():
        ctx = dict(COMMON)
        ctx.update(fields)
        contexts[name] = ctx
    with open(os.path.join(HERE, "conversations.json"), "w", encoding="utf-8") as f:
        json.dump(contexts, f, ensure_ascii=False, indent=2)
        f.write("\n")
    for old in glob.glob(os.path.join(HERE, "*.expected")) + glob.glob(os.path.join(HERE, "*.error")):
        os.remove(old)
    count = 0
    for path in sorted(glob.glob(os.path.join(HERE, "*.jinja"))):
        template_name = os.path.basename(path)[:-len(".jinja")]
        with open(path, encoding="utf-8", newline="") as f:
            template = env.from_string(f.read())
        for conv, (_, both) in CONVERSATIONS.items():
            for gen in ([True, False] if both else [True]):
                ctx = dict(contexts[conv], add_generation_prompt=gen)
                stem = os.path.join(HERE, "%s.%s.%s" % (template_name, conv, "gen" if gen else "nogen"))
                try:
                    out, ext = template.render(**ctx), ".expected"
                except Raised as e:
                    out, ext = "raise\n%s" % e.message, ".error"
                except Exception as e:  # noqa: BLE001 - any failure is a golden outcome
                    out, ext = "error\n%s: %s" % (type(e).__name__, e), ".error"
                with open(stem + ext, "w", encoding="utf-8", newline="") as f:
                    f.write(out)
                count += 1
    print("wrote %d golden files" % count, file=sys.stderr)


if __name__ == "__main__":
    main()
