#!/usr/bin/env python3
"""Writes the seed corpora of grammar_fuzz and toolcall_fuzz (fuzz/corpus/grammar, fuzz/corpus/toolcall).

Usage: python3 fuzz/text_seeds.py   (from anywhere; it replaces the files in both folders)

The input layouts are those of fuzz/grammar_fuzz.cc and fuzz/toolcall_fuzz.cc (see their headers and
docs/fuzzing.md). The token choices and piece sizes come from a fixed-seed generator: the same files
every time.
"""
import glob
import json
import os
import random

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LEN = 4096  # the runs' -max_len
rng = random.Random(20261201)


def choices(n, bad_every=0):
    """n token choices (two bytes each); every bad_every-th first tries a disallowed token (top bit)."""
    out = bytearray()
    for i in range(n):
        hi, lo = rng.randrange(128), rng.randrange(256)
        if bad_every and i % bad_every == bad_every - 1:
            hi |= 0x80
        out += bytes([hi, lo])
    return bytes(out)


def clear(folder):
    os.makedirs(folder, exist_ok=True)
    for f in glob.glob(os.path.join(folder, '*')):
        os.remove(f)


def write(folder, name, data):
    assert len(data) <= MAX_LEN, (name, len(data))
    with open(os.path.join(folder, name), 'wb') as f:
        f.write(data)


# ---- grammar_fuzz: byte 0 = mode (0 GBNF, 1 JSON Schema, 2 AnyJson bytes) | options << 2 ---------------

GRAMMAR = os.path.join(ROOT, 'fuzz/corpus/grammar')

GBNF = {
    'arith': '# arithmetic\nroot ::= expr\nexpr ::= term ( [-+] term )*\nterm ::= factor ( [*/] factor )*\n'
             'factor ::= number | "(" expr ")" | "-" factor\nnumber ::= [0-9]+ ( "." [0-9]{1,3} )?\n',
    'list': 'root ::= item+\nitem ::= "- " [^\\n]{1,40} "\\n"\n',
    'repeat': 'root ::= "a"{2,5} "b"{3} "c"{,2} "d"{1,} ( "x" | "yz" )* "!"?\n',
    'classes': 'root ::= [a-zA-Z_] [a-zA-Z0-9_\\-]* ":" [^\\x00-\\x1f"\\\\]* [\\u00e9\\u4e2d\\U0001F600]\n',
    'unicode': 'root ::= ( "café" | "中文" | "😀" | . ) ( "→" .{0,3} )?\n',
    'escapes': 'root ::= "\\x41\\u00e9\\t\\n\\\\\\"" [\\[\\]\\-\\^] "end"\n',
    'recursion': 'root ::= pair\npair ::= "(" pair* ")" | "[" inner "]"\ninner ::= pair? ( "," pair )*\n',
    'json_like': 'root ::= obj\nobj ::= "{" ( str ":" val ( "," str ":" val )* )? "}"\n'
                 'val ::= str | num | obj | "[" ( val ( "," val )* )? "]" | "true" | "false" | "null"\n'
                 'str ::= "\\"" [a-z ]{0,10} "\\""\nnum ::= "-"? [0-9]{1,4}\n',
    'empty_alt': 'root ::= ( | "a" | "b" ) ( "c" | )\n',
    'ambiguous': 'root ::= a | b\na ::= "x"+ "y"\nb ::= "x" "x"* "z"? "y"?\n',
    'answer': 'root ::= "Answer: " ( "yes" | "no" ) ".\\n" ( "Because " [a-z ,]{1,60} "." )?\n',
    # Refused: each with its own message.
    'left_recursion': 'root ::= expr\nexpr ::= expr "+" term | term\nterm ::= [0-9]\n',
    'undefined_rule': 'root ::= foo bar\nfoo ::= "x"\n',
    'unterminated': 'root ::= "abc\n',
    'no_root': 'start ::= "x"\n',
    'never_ends': 'root ::= a\na ::= "x" a\n',
    'double_def': 'root ::= "a"\nroot ::= "b"\n',
    'big_repeat': 'root ::= ( [a-z]{1,50} " " ){1,20}\n',
    'bad_escape': 'root ::= "\\uD800" [\\x]\n',
    'bad_repeat': 'root ::= "a"{5,2} "b"{100001}\n',
}

EXTRA_SCHEMAS = {
    'self_ref': '{"$ref": "#"}',
    'not_json': '{"type": "object", "properties": {',
    'defs_cycle': '{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}',
    'pattern_num': '{"type": "string", "pattern": "^[a-f0-9]{8}(-[a-z]+)*$"}',
    'big_range': '{"type": "integer", "minimum": -123456789012, "maximum": 98765432109876}',
    'enum_mixed': '{"enum": ["a", 1, null, true, {"x": [1, 2]}, "caf\\u00e9"]}',
    'array_items': '{"type": "array", "items": {"type": ["string", "null"], "maxLength": 3}, "minItems": 1, '
                   '"maxItems": 4}',
}

# Valid and invalid JSON for AnyJson: UTF-8 (a surrogate encoded, an overlong), number limits, whitespace.
ANY_JSON = [
    b'{"a": [1, 2.5e-3, -0, true, false, null], "b": {"c": "d\\u00e9\\n"}}',
    b'[\n  {"k": "v"},\n\t[],\n  "\xe2\x82\xac\xf0\x9f\x98\x80"\n]',
    b'"\\ud83d\\ude00"', b'"\xed\xa0\x80"', b'"\xc0\xaf"', b'12345678901234567', b'1.12345678901234567',
    b'1e100', b'{"a" : 1}', b' {}', b'[1,]', b'"\x01"', b'-', b'{"a":{"b":{"c":{"d":[[[[[]]]]]}}}}',
]

# Ambiguous recursive grammars whose parser stacks double at every "(" / "[" (docs/fuzzing.md, findings).
AMBIGUOUS_GBNF = b'root ::= a\na ::= "(" ( a | b )*\nb ::= "(" ( a | b )*\n'
AMBIGUOUS_SCHEMA = (b'{"$defs": {"a": {"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/a"}, '
                    b'{"$ref": "#/$defs/b"}]}}, "b": {"type": "array", "items": {"anyOf": '
                    b'[{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/b"}]}}}, "$ref": "#/$defs/a"}')


def grammar_seeds():
    clear(GRAMMAR)
    for name, text in GBNF.items():
        write(GRAMMAR, 'gbnf_' + name, b'\x00' + text.encode() + b'\x00' + choices(60, 7))
        if name in ('arith', 'json_like', 'recursion', 'ambiguous'):  # option bit: compare uncached masks
            write(GRAMMAR, 'gbnf_uncached_' + name, b'\x04' + text.encode() + b'\x00' + choices(120, 9))
    # The test schemas' "schema" members; their first valid and invalid texts for AnyJson.
    for path in sorted(glob.glob(os.path.join(ROOT, 'src/grammar/testdata/schemas/*.json'))):
        base = os.path.basename(path)[:-5]
        with open(path) as f:
            doc = json.load(f)
        text = json.dumps(doc['schema'], ensure_ascii=False).encode()
        write(GRAMMAR, 'schema_' + base, b'\x01' + text + b'\x00' + choices(150, 11))
        for i, t in enumerate(doc.get('valid_text', [])[:2]):
            write(GRAMMAR, 'anyjson_%s_valid%d' % (base, i), bytes([0x02 | (rng.randrange(64) << 2)]) + t.encode())
        for i, t in enumerate(doc.get('invalid_text', [])[:1]):
            write(GRAMMAR, 'anyjson_%s_invalid%d' % (base, i), b'\x02' + t.encode())
    with open(os.path.join(ROOT, 'src/grammar/testdata/unsupported.json')) as f:
        unsupported = json.load(f)
    for i, u in enumerate(unsupported[:6]):
        write(GRAMMAR, 'schema_unsupported%d' % i, b'\x01' + json.dumps(u['schema']).encode() + b'\x00' + choices(10))
    for name, text in EXTRA_SCHEMAS.items():
        write(GRAMMAR, 'schema_' + name, b'\x01' + text.encode() + b'\x00' + choices(100, 5))
    for i, t in enumerate(ANY_JSON):  # options: chunk sizes 1 + (options >> 1)
        write(GRAMMAR, 'anyjson_%02d' % i, bytes([0x02 | ((i * 7 % 64) << 2)]) + t)


# ---- toolcall_fuzz: byte 0 = n size bytes | 8 (byte-at-a-time stream) | format << 4 | 0x80 (parallel) ----

TOOLCALL = os.path.join(ROOT, 'fuzz/corpus/toolcall')

W = '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}'
P = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
OUTPUTS = {  # model outputs of each format, good, cut off and malformed
    'hermes_one': '<tool_call>\n' + W + '\n</tool_call>',
    'hermes_two': 'Let me check.\n\n<tool_call>\n' + W + '\n</tool_call>\n<tool_call>\n{"name": "add", '
                  '"arguments": {"a": 1, "b": [true, null, -2.5e3]}}\n</tool_call>\n\nDone.',
    'hermes_cut': '<tool_call>{"name": "f", "arguments": {"q": "say \\"hi\\" {not} [json] <tool_call>", '
                  '"n": {"deep": {"x": []}}',
    'hermes_bad': '<tool_call>oops</tool_call>\n<tool_call>{"name": 5, "arguments": {}}</tool_call>'
                  '<tool_call>{"name": "f"}</tool_call> <tool',
    'hermes_reordered': '<tool_call> {"arguments": {"a": 1}, "name": "f", "id": 3} </tool_call>',
    'llama3_one': P,
    'llama3_tag': '<|python_tag|>' + P + '; {"name": "add", "parameters": {"a": 1}}',
    'llama3_text': 'Hello {"name": "f", "parameters": {}} world',
    'llama3_cut': '  {"name": "search-web", "parameters": {"text":"caf\\u00e9 \\\\ é',
    'mistral_list': '[TOOL_CALLS][' + W + ', {"name": "f", "arguments": {}}]',
    'mistral_args': '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]f[ARGS]{}',
    'mistral_bad': '[TOOL_CALLS][{"name": "f", "arguments": "{}"}] [TOOL_CALLS]f[ARGS]nope [TOOL',
    'granite_list': '<|tool_call|>[' + W + ',\n{"name": "f", "arguments": {"x": [1, {"y": null}]}}]',
    'granite_bad': 'Sure. <|tool_call|>[{"name": "", "arguments": {}}] <|tool_call|>[{',
    'mixed_triggers': 'Hello <tool_call> [TOOL_CALLS] <|tool_call|> <|python_tag|> {"name" ; } ] \n\n',
    'plain': 'Plain answer, no calls.\n',
    'unicode': '<tool_call>\n{"name": "f", "arguments": {"t": "中文 😀 \\ud83d\\ude00"}}\n</tool_call>'.encode()
               + b'\xe2\x82',  # ends inside a character
}

REQUESTS = {  # request bodies (tools, tool_choice), accepted and refused
    'request_tools': {"tools": [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city"], "additionalProperties": False}}}, {"type": "function", "function": {
        "name": "add", "parameters": {"properties": {"a": {"type": "integer"},
                                                     "b": {"type": "number", "minimum": 0}}}}}],
        "tool_choice": "required"},
    'request_named': {"tools": [{"type": "function", "function": {"name": "f", "strict": True}}],
                      "tool_choice": {"type": "function", "function": {"name": "f"}}},
    'request_bad_name': {"tools": [{"type": "function", "function": {"name": "bad name!"}}]},
    'request_dup': {"tools": [{"type": "function", "function": {"name": "f"}},
                              {"type": "function", "function": {"name": "f"}}]},
    'request_unsupported': {"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"not": {}}}}}}], "tool_choice": "auto"},
    'request_recursive': {"tools": [{"type": "function", "function": {"name": "tree", "parameters": {
        "type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}}}],
        "tool_choice": "required"},
    'tools_array': [{"type": "function", "function": {"name": "g", "parameters": {"type": "object"}}}],
    'choice_unknown': {"tools": [], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
}


def toolcall_seed(name, text, sizes=b'', bytewise=False, high=0):
    assert len(sizes) < 8
    flags = len(sizes) | (8 if bytewise else 0) | high
    write(TOOLCALL, name, bytes([flags]) + sizes + (text if isinstance(text, bytes) else text.encode()))


def toolcall_seeds():
    clear(TOOLCALL)
    for i, (name, text) in enumerate(sorted(OUTPUTS.items())):
        sizes = bytes(rng.randrange(256) for _ in range(i % 8))
        toolcall_seed(name, text, sizes, bytewise=(i % 3 == 0))
    for i, (name, body) in enumerate(REQUESTS.items()):
        toolcall_seed(name, json.dumps(body), high=(i % 5) << 4 | (0x80 if i % 2 else 0))


if __name__ == '__main__':
    grammar_seeds()
    toolcall_seeds()
    # Written last (after the toolcall seeds' draws from rng), so the other files stay as they were.
    write(GRAMMAR, 'gbnf_ambiguous_exp', b'\x00' + AMBIGUOUS_GBNF + b'\x00' + b'\x00\x00' * 40)
    write(GRAMMAR, 'schema_ambiguous_exp', b'\x01' + AMBIGUOUS_SCHEMA + b'\x00' + choices(40))
