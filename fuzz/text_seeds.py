#!/usr/bin/env python3
"""Writes the seed corpora of grammar_fuzz, toolcall_fuzz, template_fuzz, tokenizer_fuzz, store_fuzz,
request_fuzz and route_fuzz (fuzz/corpus/<name>, the target's name less "_fuzz").

Usage: python3 fuzz/text_seeds.py   (from anywhere; it replaces the files in those folders)

The input layouts are those of fuzz/grammar_fuzz.cc, fuzz/toolcall_fuzz.cc, fuzz/template_fuzz.cc,
fuzz/tokenizer_fuzz.cc, fuzz/store_fuzz.cc, fuzz/request_fuzz.cc and fuzz/route_fuzz.cc (see their headers and
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


def write(folder, name, data, max_len=MAX_LEN):
    assert len(data) <= max_len, (name, len(data))
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


# ---- template_fuzz: byte 0 = add_generation_prompt, the template, NUL, the context JSON -----------------

TEMPLATE = os.path.join(ROOT, 'fuzz/corpus/template')
TEMPLATE_MAX_LEN = 8192  # template_fuzz's -max_len: the real templates run to 4.6 KB

# Templates the render budget must stop (from src/template/template_budget_test.cc) and ones that exercise
# the rarer paths: errors with positions, macros, filters, string formatting, namespaces, slicing.
EXTRA_TEMPLATES = {
    'loop_nest': '{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}',
    'big_strings': "{% for i in range(1000) %}{% set x = 'a' * 30000000 %}{% endfor %}",
    'quadratic_concat': "{% set ns = namespace(s='x') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ "
                        "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' %}{% endfor %}",
    'big_operand': "{% set big = 'x' * 1000000 %}{% for i in range(100000) %}{{ big.find('z') }}{% endfor %}",
    'list_repeat': "{% for i in range(100000) %}{{ ['xxxxxxxxxxxxxxxx'] * 200000 }}{% endfor %}",
    'branching_macro': '{% macro f(n) %}{{ f(n + 1) }}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}',
    'deep_parens': '{{ ' + '(' * 300 + '1' + ')' * 300 + ' }}',
    'raise': "{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}",
    'undefined_attr': '{{ messages[0].nope.deeper }}',
    'int_overflow': '{{ 9223372036854775807 + 1 }}',
    'filters': "{% for m in messages %}{{ m.content|trim|upper|replace('A', 'b')|truncate(9) }}"
               "{{ m|tojson(indent=2) }}{{ m.content|wordcount }}{{ (m.content ~ '')|list|unique|join(',') }}"
               "{% endfor %}{{ messages|map(attribute='role')|select('equalto', 'user')|list|length }}"
               "{{ messages|selectattr('content')|rejectattr('role', 'in', ['tool'])|first }}"
               "{{ [3, 1, 2]|sort(reverse=true)|last }}{{ {'b': 1, 'a': 2}|dictsort }}{{ 'x%sy%d'|format('a', 3) }}",
    'methods': "{% set ns = namespace(n=0, s='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
               "{% set ns.s = ns.s ~ m.role[:2] ~ m.role[::-1] %}{{ m.content.split(' ')|length if m.content is string }}"
               "{{ m.content.startswith('W') if m.content is string }}{{ '{0}-{1}'.format(loop.index, loop.revindex) }}"
               "{{ loop.cycle('a', 'b') }}{% if loop.last %}{{ ns.s.strip('us') }}{% endif %}{% endfor %}"
               "{{ ns.n }}{{ {'k': messages|length}.items()|list }}{{ range(3, 10, 2)|list }}",
    'macro_call': "{% macro render(m, prefix='>') -%}{{ prefix }}{{ m.role }}: {{ m.content }}\n{%- endmacro %}"
                  "{% for m in messages if m.role != 'system' %}{{ render(m, prefix='# ') }}{% else %}none{% endfor %}",
    'set_block': "{% set header %}{{ bos_token }}{% for t in tools or [] %}{{ t.function.name }}{% endfor %}"
                 "{% endset %}{{ header }}{% filter upper %}{{ messages[-1].content }}{% endfilter %}"
                 "{% raw %}{{ not rendered }}{% endraw %}{# a comment #}",
    'syntax_unclosed': '{% for m in messages %}{{ m.content }',
    'syntax_unknown_tag': '{% include "other.jinja" %}',
    'syntax_bad_filter': '{{ messages|no_such_filter }}',
    'strftime': "{{ strftime_now('%d %b %Y') }}{{ messages|length }}",
    'whitespace': '  {%- for m in messages -%}\n  {{- m.role -}}  \n{%+ if true +%} x {%- endif %}{% endfor %}',
    # Reference cycles, which the render breaks when it ends (finding 7 of docs/fuzzing.md).
    'namespace_cycle': "{% set ns = namespace(n=0) %}{% set ns.me = ns %}{% set other = namespace(l=[ns]) %}"
                       "{% set ns.other = other %}{{ ns.me.other.l[0].n }}",
}


def template_seeds():
    clear(TEMPLATE)
    conversations = json.load(open(os.path.join(ROOT, 'src/template/testdata/conversations.json')))
    names = sorted(conversations)
    jinjas = sorted(glob.glob(os.path.join(ROOT, 'src/template/testdata/*.jinja')))
    for i, path in enumerate(jinjas):
        source = open(path, 'rb').read()
        conv = conversations[names[i % len(names)]]
        ctx = {'messages': conv['messages'], 'tools': conv.get('tools')}
        if i % 4 == 3:
            ctx['variables'] = {'enable_thinking': False, 'date_string': conv.get('date_string', '')}
        body = json.dumps(ctx, ensure_ascii=False, separators=(',', ':')).encode()
        name = os.path.basename(path)[:-len('.jinja')]
        write(TEMPLATE, name, bytes([1 - i % 2]) + source + b'\0' + body, TEMPLATE_MAX_LEN)
    for i, (name, source) in enumerate(sorted(EXTRA_TEMPLATES.items())):
        # Half get the default conversation (no NUL), half an explicit one given as a bare array.
        data = bytes([i % 2]) + source.encode()
        if i % 2:
            data += b'\0' + json.dumps(conversations[names[i % len(names)]]['messages']).encode()
        write(TEMPLATE, 'x_' + name, data, TEMPLATE_MAX_LEN)


# ---- tokenizer_fuzz: byte 0 = mode | add_special << 1 | parse_special << 2 | continuation << 3 | hide << 4 --

TOKENIZER = os.path.join(ROOT, 'fuzz/corpus/tokenizer')
TOKENIZER_MAX_LEN = 32768  # tokenizer_fuzz's -max_len: whole GGUF seeds
SHIPPED = ['llama-spm', 'phi-3', 'baichuan', 'gpt-2', 'gpt-neox', 'falcon', 'mpt', 'starcoder', 'refact',
           'deepseek-coder', 'deepseek-llm']  # tokenizer_fuzz's kShipped, in its order
VOCAB_DIR = os.path.join(ROOT, '..', 'shared', 'ref', 'vocab')
EXTRA_TEXTS = ['<s>Hello</s> world', '<|endoftext|>x<|endoftext|>', '<|im_start|>user\nhi<|im_end|>',
               '<|user|>\nQ?<|end|>\n<|assistant|>', 'caf\u00e9 \u2581\u2581 \u4e2d\u6587 \U0001F600\r\n\t  x',
               ' , . ? ! \'s don\'t', '\u00a0\u3000\u200b', 'a' * 600, ' ' * 300 + '\n' * 50]
INVALID_UTF8 = [b'\xff\xfe', b'abc\xe2\x82', b'\xc0\xaf', b'\xed\xa0\x80x', b'\xe2\x82\xac\x80\xf4\x90\x80\x80']


def gpt2_byte_chars():
    """The byte-level BPE alphabet: printable bytes stand for themselves, the rest for code points from 256."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, n = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


def spec_seed(name, flags, model, pre, opts, tokens, merges, params, text):
    data = bytes([flags | 1, model, pre, opts]) + '\n'.join(tokens).encode() + b'\0' + \
        '\n'.join(merges).encode() + b'\0' + bytes(params) + b'\0' + text
    write(TOKENIZER, name, data, TEMPLATE_MAX_LEN)


def tokenizer_seeds():
    clear(TOKENIZER)
    texts = []
    for name in SHIPPED:
        path = os.path.join(VOCAB_DIR, 'ggml-vocab-%s.gguf.inp' % name)
        if os.path.exists(path):
            texts += open(path, encoding='utf-8').read().split('\n__ggml_vocab_test__\n')
    texts = sorted(set(t for t in texts if len(t.encode()) < 2000)) + EXTRA_TEXTS
    for i, text in enumerate(texts):
        # Each text through two vocabularies, with varied flags.
        for k in range(2):
            v = (i + k * 5) % len(SHIPPED)
            flags = ((i + k) % 16) << 1
            write(TOKENIZER, 'ship_%s_%03d' % (SHIPPED[v], i), bytes([flags, v]) + text.encode(), TEMPLATE_MAX_LEN)
    for i, raw in enumerate(INVALID_UTF8):
        write(TOKENIZER, 'ship_invalid_%d' % i, bytes([(i % 4) << 1, i * 3 % len(SHIPPED)]) + raw)
    # A SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens, pieces with scores.
    # The params give each token its type (2 unknown, 3 control, 6 byte, 1 normal, 4 user-defined) and score;
    # their first five bytes are also the special ids less 2 (here odd ones: bos 0, eos 1, eot 1, unk 4, pad 4).
    words = ['\u2581the', '\u2581a', 'he', 'll', 'o', '\u2581hello', '\u2581wor', 'ld', '\u2581', 'e', 'h', 'l',
             'w', 'r', 'd', '\u4e2d', '<tool>']
    spm_tokens = ['<unk>', '<s>', '</s>'] + ['<0x%02X>' % b for b in range(256)] + words
    params = [2, 3, 3] + [6] * 256 + [1] * (len(words) - 1) + [4]
    spec_seed('spec_spm', 0, 0, 0, 0b10011111, spm_tokens, [], params,
              'Hello world \u4e2d\u6587 <tool>x \U0001F600'.encode())
    # The same with bos 1, eos 2, unk 0 and no eot or pad (255 - 2 is past the vocabulary).
    spec_seed('spec_spm_special', 6, 0, 0, 0b00111111, spm_tokens, [], [3, 4, 255, 2, 255] + params[5:],
              '<s>hello</s> <tool> wor'.encode())
    spec_seed('spec_spm_dup', 0, 0, 0, 0, ['a', 'b', 'a'], [], [], b'aab')
    # A byte-level BPE vocabulary: the 256 byte characters, merges and merged tokens.
    table = gpt2_byte_chars()
    bpe_tokens = [table[b] for b in range(256)]
    sp = table[32]
    merges = ['h e', 'l l', 'he ll', 'hell o', sp + ' w', sp + 'w o', 'r l', 'rl d', sp + 'wo rld', 't h', sp + ' th']
    bpe_tokens += ['he', 'll', 'hell', 'hello', sp + 'w', sp + 'wo', 'rl', 'rld', sp + 'world', 'th', sp + 'th',
                   '<|endoftext|>', '<|im_start|>']
    for i, pre in enumerate([1, 2, 3, 4, 9]):
        spec_seed('spec_bpe_%d' % i, (i % 3) << 1, 1, pre, 0b00000110 if i % 2 else 0,
                  bpe_tokens, merges, [1] * 267 + [3, 3], 'hello world the<|endoftext|> caf\u00e9 12345 \n\n'.encode())
    spec_seed('spec_bpe_bad_merge', 0, 1, 3, 0, bpe_tokens[:260], ['nope', 'a b c', ''], [], b'hello')
    spec_seed('spec_bert', 0, 2, 0, 0, ['[UNK]', 'a'], [], [], b'a')
    spec_seed('spec_unknown_pre', 0, 1, 11, 0, ['a', 'b'], ['a b'], [], b'ab')
    # Mode 2: GGUF files with tokenizer keys (gguf_fuzz's seeds, written by gguf_seeds), read by FromGguf.
    for i, name in enumerate(['gpt2_vocab_meta', 'stories260K_meta', 'tiny_llama_q4_0_meta', 'empty_v3']):
        gguf = open(os.path.join(ROOT, 'fuzz/corpus/gguf', name + '.gguf'), 'rb').read()
        write(TOKENIZER, 'gguf_' + name, bytes([32 | (i % 4) << 1]) + gguf, TOKENIZER_MAX_LEN)


# ---- store_fuzz: byte 0 = flags (1 seal manifests, 2 point them at the chunks, 4 seal session records), then
# records of kind (0 manifest, 1 chunk, 5 misnamed chunk, 2 session record, 3 S3 XML), u16 length, bytes ------

STORE = os.path.join(ROOT, 'fuzz/corpus/store')


def store_record(kind, data):
    data = data if isinstance(data, bytes) else data.encode()
    return bytes([kind]) + len(data).to_bytes(2, 'little') + data


def manifest(head, tail, n_chunks, version=1):
    """A manifest with zeroed chunk entries and CRC: store_fuzz's flags fill them in."""
    header = b'LLAMAYMF' + version.to_bytes(4, 'little') + bytes(4)
    header += b''.join(v.to_bytes(8, 'little') for v in (len(head) + len(tail), len(head), 0, len(tail), n_chunks))
    header += bytes(64 - len(header))
    return header + head + tail + bytes(24 * n_chunks) + bytes(4)


def session_record(generation, name, tail):
    return '{"generation":%d,"snapshot":"%s","tail":[%s]}\n00000000' % (generation, name, ','.join(map(str, tail)))


LIST_PAGE = ('<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
             '<Name>b</Name><Prefix>models/</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys>'
             '<IsTruncated>%s</IsTruncated>%s<Contents><Key>models/a&amp;b/snapshots/x</Key>'
             '<LastModified>2026-12-01T00:00:00.000Z</LastModified><ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag>'
             '<Size>1234</Size><StorageClass>STANDARD</StorageClass></Contents><Contents><Key><![CDATA[models/c]]></Key>'
             '<Size>0</Size></Contents><!-- a comment --><CommonPrefixes><Prefix>p/</Prefix></CommonPrefixes>'
             '</ListBucketResult>')
XML_DOCS = {
    'list': LIST_PAGE % ('false', ''),
    'list_truncated': LIST_PAGE % ('true', '<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM='
                                           '</NextContinuationToken>'),
    'list_truncated_no_token': LIST_PAGE % ('true', ''),
    'list_bad_size': '<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>',
    'list_no_key': '<ListBucketResult><Contents><Size>3</Size></Contents></ListBucketResult>',
    'list_mismatched': '<ListBucketResult><Contents><Key>k</Contents></Key></ListBucketResult>',
    'list_entities': '<s3:ListBucketResult xmlns:s3="x"><s3:Contents><s3:Key>&#x41;&#66;&lt;&bogus;&#0;&#x110000;'
                     '</s3:Key><s3:Size> 7 </s3:Size></s3:Contents><Empty/></s3:ListBucketResult>',
    'error': '<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>The specified key does '
             'not exist.</Message><Key>a</Key><RequestId>1</RequestId></Error>',
    'error_long': '<Error><Code>SlowDown</Code><Message>' + 'x' * 500 + '</Message></Error>',
    'unterminated': '<ListBucketResult><Contents><Key>k</Key',
    'doctype': '<!DOCTYPE x [<!ENTITY a "b">]><?pi x?><ListBucketResult/>',
}


def store_seeds():
    clear(STORE)
    chunks = [bytes(range(i, i + 64)) * (i + 1) for i in range(4)]
    head, tail = b'LLAMAYKV' + bytes(56), b'tail' + bytes(8) + b'crc!'
    full = [store_record(0, manifest(head, tail, 5)), store_record(0, manifest(head, tail, 1))]
    full += [store_record(1, c) for c in chunks]
    full += [store_record(2, session_record(0, 'sess.g0', [])), store_record(2, session_record(1, 'sess.g1', [5, -1, 7]))]
    write(STORE, 'pull_ok', bytes([7]) + b''.join(full), 65536)
    # The same with one chunk stored under another's name, and without the fix-ups (refused: CRC, lengths).
    bad = list(full)
    bad[3] = store_record(5, chunks[1])
    write(STORE, 'pull_misnamed_chunk', bytes([7]) + b''.join(bad), 65536)
    write(STORE, 'pull_unsealed', bytes([0]) + b''.join(full), 65536)
    write(STORE, 'pull_missing_chunks', bytes([3]) + store_record(0, manifest(head, tail, 3)), 65536)
    write(STORE, 'manifest_v2', bytes([3]) + store_record(0, manifest(head, tail, 0, version=2)) +
          store_record(1, chunks[0]), 65536)
    write(STORE, 'manifest_no_tail', bytes([3]) + store_record(0, manifest(head, b'', 1)) + store_record(1, chunks[0]),
          65536)
    write(STORE, 'records', bytes([4]) + store_record(2, session_record(0, 'a' * 200, [1])) +
          store_record(2, session_record(7, 'sess.g7', [1, 2])) + store_record(2, '{"generation":1,"snapshot":"x",'
                                                                                  '"tail":[1,'), 65536)
    for name, doc in sorted(XML_DOCS.items()):
        write(STORE, 'xml_' + name, bytes([0]) + store_record(3, doc), 65536)


# ---- request_fuzz: the request body as sent ----------------------------------------------------------

REQUEST = os.path.join(ROOT, 'fuzz/corpus/request')
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}]
PROPERTY_NAMES_TOOL = {"type": "function", "function": {"name": "edit", "parameters": {
    "type": "object", "propertyNames": {"pattern": "^[a-z]+$"},
    "properties": {"path": {"type": "string", "not": {"const": ""}}, "x at y": {"if": {}, "type": "integer"}}}}}
REQUEST_BODIES = {
    'chat_full': {"model": "m", "messages": MESSAGES, "max_tokens": 64, "seed": -3, "stop": ["\n\n", "END"],
                  "temperature": 0.7, "top_p": 0.9, "stream": True, "stream_options": {"include_usage": True},
                  "parallel_tool_calls": False, **REQUESTS['request_tools']},
    'response_format_schema': {"messages": MESSAGES, "response_format": {"type": "json_schema", "json_schema": {
        "name": "w", "strict": True, "schema": {"type": "object", "properties": {"t": {"type": "number"}},
                                                "required": ["t"]}}}},
    'response_format_object': {"messages": MESSAGES, "response_format": {"type": "json_object"}},
    'response_format_object_schema': {"response_format": {"type": "json_object", "schema": {"type": "array"}}},
    'response_format_text': {"response_format": {"type": "text"}, "stop": "x"},
    'json_schema_top': {"json_schema": {"type": "string", "maxLength": 8}},
    'grammar': {"grammar": 'root ::= "yes" | "no"', "max_tokens": 3},
    'grammar_bad': {"grammar": 'root ::= ( "a"', "max_tokens": 0},
    'several_formats': {"grammar": "root ::= \"a\"", "json_schema": {}},
    'wrong_types': {"messages": MESSAGES, "max_tokens": "10", "seed": 1.5, "stop": [1, 2], "tools": {},
                    "response_format": {"type": 3}},
    'anthropic_tools': {"tools": [{"type": "function", "function": {"name": "read", "parameters": {
        "type": "object", "properties": {"p": {"type": "string"}}}}}, PROPERTY_NAMES_TOOL]},
    'unsupported_keywords': {"tools": [PROPERTY_NAMES_TOOL], "tool_choice": {"type": "function",
                                                                             "function": {"name": "edit"}}},
}


def request_seeds():
    clear(REQUEST)
    for name, body in sorted(REQUEST_BODIES.items()):
        write(REQUEST, name, json.dumps(body).encode())
    for name, body in sorted(REQUESTS.items()):
        write(REQUEST, 'toolcall_' + name, json.dumps(body).encode())
    # Bodies ParseBody refuses or repairs: not an object, not JSON, lone surrogate escapes (read as U+FFFD).
    # Groups nested past the parser's bound (found by request_fuzz: a stack overflow before the bound).
    write(REQUEST, 'deep_nested_groups',
          json.dumps({'grammar': 'root ::= ' + '(' * 1500 + '"x"' + ')' * 1500}).encode())
    # Repetitions of repetitions around an empty group (found by request_fuzz: past a million NFA states).
    write(REQUEST, 'nested_repetitions',
          json.dumps({'grammar': 'root ::= ((((((()))))))' + '+' * 19 + '#+;' + '+' * 18 + ')' * 16}).encode())
    # A required name of 3,000 characters beside additionalProperties: a key trie of thousands of rules of one
    # name (found by request_fuzz: rule naming was quadratic in them).
    write(REQUEST, 'long_required_key', json.dumps({'tools': [{'type': 'function', 'function': {
        'name': 'f', 'parameters': {'type': 'object', 'properties': {'a': {'type': 'string'}},
                                    'required': ['k' * 1500 + 'x' * 1500],
                                    'additionalProperties': {'type': 'number'}}}}]}).encode())
    write(REQUEST, 'not_object', b'[1, 2]')
    write(REQUEST, 'not_json', b'{"messages": [')
    write(REQUEST, 'lone_surrogate', b'{"stop": "\\ud800x", "tools": [{"type": "function", "function": '
                                     b'{"name": "f", "description": "\\udc00"}}]}')



# ---- route_fuzz: route byte, two flag bytes, EXTRA, NUL, query, NUL, body ------------------------------
# Byte 1: bits 0-1 the path's id (0 live context A, 1 its fork B, 2 the stored response, 3 EXTRA), bits 2-4
# the Content-Type (0 JSON, 1 none, 4 multipart, 5 octet-stream, 7 EXTRA), 0x20 Accept: text/event-stream,
# 0x40 Last-Event-ID: EXTRA, 0x80 chunked. Byte 2: bits 0-2 the method (0 the route's, 3 GET, 4 POST,
# 5 DELETE, 6 HEAD, 7 PUT), bits 3-4 Origin (1 own, 2 foreign), 0x20 gzip, 0x40 If-None-Match, 0x80 past the
# body limit. "$0", "$1", "$R" name the live ids. Route numbers are fuzz/route_fuzz.cc's FixedRoutes().

ROUTE = os.path.join(ROOT, 'fuzz/corpus/route')
ROUTE_MAX_LEN = 8192
R_HEALTH, R_MODELS, R_COMPLETIONS, R_CHAT, R_MESSAGES, R_COUNT, R_RESPONSES, R_INPUT_TOKENS = range(8)
R_GET_RESPONSE, R_DELETE_RESPONSE, R_METRICS, R_STATE, R_PAGES, R_EVENTS, R_CREATE, R_LIST = range(8, 16)
R_RESTORE, R_FORK, R_PUSH, R_STORED, R_SNAPSHOT, R_DELETE, R_VERSION, R_TAGS, R_PS, R_SHOW = range(16, 26)
R_OLLAMA_CHAT, R_GENERATE, R_RESTORE_EDITED, R_PAGE, R_ANY_PATH, R_FIRST_FILE = range(26, 32)
ID_A, ID_B, ID_RESPONSE, ID_EXTRA = 0, 1, 2, 3
CT_NONE, CT_MULTIPART, CT_OCTET = 1 << 2, 4 << 2, 5 << 2
SSE, LAST_EVENT_ID, CHUNKED = 0x20, 0x40, 0x80
M_GET, M_POST, M_DELETE, M_HEAD, M_PUT = 3, 4, 5, 6, 7
ORIGIN_OWN, ORIGIN_FOREIGN, GZIP, IF_NONE_MATCH, OVERSIZED = 1 << 3, 2 << 3, 0x20, 0x40, 0x80
USER = [{"role": "user", "content": "Hello there"}]
WEATHER_TOOL = {"type": "function", "function": {"name": "weather", "description": "The weather in a city",
                                                 "parameters": {"type": "object", "properties": {
                                                     "city": {"type": "string", "maxLength": 8}},
                                                     "required": ["city"]}}}


def route_seed(route, body=b'', f1=0, f2=0, extra=b'', query=b''):
    if not isinstance(body, bytes):
        body = json.dumps(body).encode()
    return bytes([route, f1, f2]) + extra + b'\0' + query + b'\0' + body


ROUTE_SEEDS = {
    'health': route_seed(R_HEALTH),
    'models': route_seed(R_MODELS),
    'completion': route_seed(R_COMPLETIONS, {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0}),
    'completion_stream_logprobs': route_seed(R_COMPLETIONS, {
        "prompt": "abc", "max_tokens": 3, "stream": True, "logprobs": 2, "echo": False, "seed": 7,
        "stream_options": {"include_usage": True}}, f1=SSE),
    'completion_tokens_n': route_seed(R_COMPLETIONS, {"prompt": [1, 70, 71, 72], "n": 3, "max_tokens": 2,
                                                      "stop": ["\n"]}),
    'completion_session_echo': route_seed(R_COMPLETIONS, {"prompt": " more", "llamay_session": "$1",
                                                          "max_tokens": 2, "echo": True, "logprobs": 1}),
    'completion_grammar_long': route_seed(R_COMPLETIONS, {"prompt": "x", "max_tokens": 100000,
                                                          "grammar": 'root ::= [a-z]+ "."'}),
    'chat': route_seed(R_CHAT, {"messages": [{"role": "system", "content": "Be brief."}] + USER, "max_tokens": 4,
                                "temperature": 0.7, "top_p": 0.9, "top_k": 40, "repetition_penalty": 1.1}),
    'chat_stream_usage': route_seed(R_CHAT, {"messages": USER, "stream": True, "stream_options": {"include_usage": True},
                                            "logprobs": True, "top_logprobs": 2}, f1=SSE),
    'chat_tools': route_seed(R_CHAT, {"messages": USER, "tools": [WEATHER_TOOL], "tool_choice": "required",
                                      "max_tokens": 24, "parallel_tool_calls": False}),
    'chat_schema': route_seed(R_CHAT, {"messages": USER, "max_tokens": 12, "response_format": {
        "type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "object", "properties": {
            "t": {"type": "number"}}, "required": ["t"]}}}}),
    'chat_session_cache_key': route_seed(R_CHAT, {"messages": USER + [{"role": "assistant", "content": "Hi",
                                                                       "reasoning_content": "greet"}],
                                                  "llamay_session": "$0", "prompt_cache_key": "k1",
                                                  "reasoning_effort": "low", "max_completion_tokens": 3}),
    'chat_multipart': route_seed(R_CHAT, {"messages": USER, "max_tokens": 1}, f1=CT_MULTIPART),
    'chat_chunked': route_seed(R_CHAT, {"messages": USER, "max_tokens": 1}, f1=CHUNKED | CT_NONE),
    'chat_oversized': route_seed(R_CHAT, {"messages": USER}, f2=OVERSIZED),
    'chat_foreign_origin': route_seed(R_CHAT, {"messages": USER}, f2=ORIGIN_FOREIGN),
    'chat_wrong_types': route_seed(R_CHAT, {"messages": [{"role": "robot", "content": 3}], "n": 65, "stop": [1],
                                            "max_tokens": "4"}),
    'messages': route_seed(R_MESSAGES, {"model": "m", "max_tokens": 4, "system": "be brief", "messages": USER}),
    'messages_stream_thinking': route_seed(R_MESSAGES, {
        "model": "m", "max_tokens": 8, "stream": True, "thinking": {"type": "enabled", "budget_tokens": 4},
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "go"}]}]}, f1=SSE),
    'messages_tools': route_seed(R_MESSAGES, {
        "model": "m", "max_tokens": 16, "tool_choice": {"type": "any"},
        "tools": [{"name": "read", "description": "Read a file", "input_schema": {
            "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}],
        "messages": [{"role": "user", "content": "read a"},
                     {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read",
                                                        "input": {"path": "a"}}]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                   "content": "text"}]}]}),
    'messages_not_json': route_seed(R_MESSAGES, b'{"model": "m", "messages": ['),
    'count_tokens': route_seed(R_COUNT, {"model": "m", "system": "s", "messages": USER}),
    'responses': route_seed(R_RESPONSES, {"model": "m", "instructions": "Be brief.", "input": "hello there",
                                          "max_output_tokens": 4, "temperature": 0}),
    'responses_stream_previous': route_seed(R_RESPONSES, {"input": [{"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "and then?"}]}], "previous_response_id": "$R", "stream": True,
        "max_output_tokens": 3}, f1=SSE),
    'responses_tools_nostore': route_seed(R_RESPONSES, {
        "input": "weather in Oslo?", "store": False, "max_output_tokens": 20, "tool_choice": "auto",
        "tools": [{"type": "function", "name": "weather", "parameters": WEATHER_TOOL["function"]["parameters"]},
                  {"type": "custom", "name": "patch"}], "reasoning": {"effort": "low"},
        "text": {"format": {"type": "json_object"}}}),
    'responses_previous_unknown': route_seed(R_RESPONSES, {"input": "x", "previous_response_id": "resp_999999"}),
    'input_tokens': route_seed(R_INPUT_TOKENS, {"input": "count these words please", "instructions": "x"}),
    'get_response': route_seed(R_GET_RESPONSE, f1=ID_RESPONSE),
    'get_response_unknown': route_seed(R_GET_RESPONSE, f1=ID_EXTRA, extra=b'resp_0'),
    'delete_response': route_seed(R_DELETE_RESPONSE, f1=ID_RESPONSE),
    'metrics': route_seed(R_METRICS),
    'state': route_seed(R_STATE),
    'pages_fork': route_seed(R_PAGES, f1=ID_B),
    'pages_response': route_seed(R_PAGES, f1=ID_RESPONSE),
    'pages_unknown': route_seed(R_PAGES, f1=ID_EXTRA, extra=b'ctx_0'),
    'events': route_seed(R_EVENTS, f1=SSE),
    'events_resume': route_seed(R_EVENTS, f1=SSE | LAST_EVENT_ID, extra=b'1'),
    'events_resume_query': route_seed(R_EVENTS, query=b'last_event_id=99999999999999999999'),
    'create_prompt': route_seed(R_CREATE, {"prompt": "A context of its own", "llamay_retain_prefix": True}),
    'create_messages_tools': route_seed(R_CREATE, {"messages": USER, "tools": [WEATHER_TOOL]}),
    'create_empty': route_seed(R_CREATE),
    'create_bad': route_seed(R_CREATE, {"prompt": ["not", "a", "string"], "llamay_retain_prefix": "yes"}),
    'list': route_seed(R_LIST),
    'restore_junk': route_seed(R_RESTORE, b'LLAMAYCTX\x01\x00\x00\x00junk', f1=CT_OCTET),
    'restore_by_name': route_seed(R_RESTORE, {"name": "snap1"}),
    'fork_two': route_seed(R_FORK, f1=ID_A, query=b'n=2'),
    'fork_bad_n': route_seed(R_FORK, f1=ID_B, query=b'n=0'),
    'fork_unknown': route_seed(R_FORK, f1=ID_EXTRA, extra=b'ctx_unknown'),
    'push': route_seed(R_PUSH, {"name": "snap1"}, f1=ID_A),
    'push_bad_name': route_seed(R_PUSH, {"name": "a/b"}, f1=ID_B),
    'stored_snapshots': route_seed(R_STORED),
    'snapshot': route_seed(R_SNAPSHOT, f1=ID_B),
    'snapshot_f32': route_seed(R_SNAPSHOT, f1=ID_A, query=b'precision=f32'),
    'snapshot_bad_precision': route_seed(R_SNAPSHOT, f1=ID_A, query=b'precision=q4'),
    'snapshot_unknown': route_seed(R_SNAPSHOT, f1=ID_EXTRA, extra=b'resp_0'),
    'delete_fork': route_seed(R_DELETE, f1=ID_B),
    'delete_unknown': route_seed(R_DELETE, f1=ID_EXTRA, extra=b'ctx 1/../x'),
    'ollama_version': route_seed(R_VERSION),
    'ollama_tags': route_seed(R_TAGS),
    'ollama_ps': route_seed(R_PS),
    'ollama_show': route_seed(R_SHOW, {"model": "llamay-demo"}),
    'ollama_chat': route_seed(R_OLLAMA_CHAT, {"model": "m", "messages": USER, "stream": False,
                                              "options": {"temperature": 0, "num_predict": 4}}),
    'ollama_chat_stream_tools': route_seed(R_OLLAMA_CHAT, {"model": "m", "messages": USER, "tools": [WEATHER_TOOL],
                                                           "think": True, "options": {"num_predict": 6}}),
    'ollama_chat_empty': route_seed(R_OLLAMA_CHAT, {"model": "m", "messages": []}),
    'ollama_generate': route_seed(R_GENERATE, {"model": "m", "prompt": "Why?", "system": "short",
                                               "options": {"num_predict": 3, "seed": 1, "stop": ["."]}}),
    'ollama_generate_raw': route_seed(R_GENERATE, {"model": "m", "prompt": "abc", "raw": True, "stream": False,
                                                   "options": {"num_predict": 2}}),
    'ollama_generate_images': route_seed(R_GENERATE, {"model": "m", "prompt": "x", "images": ["aGk="]}),
    'restore_edited_whole': route_seed(R_RESTORE_EDITED, f1=CT_OCTET),
    'restore_edited_cut': route_seed(R_RESTORE_EDITED, b'\x80\x00', f1=CT_OCTET),
    'restore_edited_flips': route_seed(R_RESTORE_EDITED, b'\x00\x00' + b'\x00\x10\x01' + b'\x40\x00\x80'
                                       + b'\xff\xf0\x04', f1=CT_OCTET),
    'page': route_seed(R_PAGE, f2=GZIP),
    'page_head_etag': route_seed(R_PAGE, f2=M_HEAD | IF_NONE_MATCH),
    'any_path': route_seed(R_ANY_PATH, extra=b'v1/nothing/here'),
    'any_path_post': route_seed(R_ANY_PATH, {"x": 1}, f2=M_POST, extra=b'api/pull'),
    'method_mismatch': route_seed(R_MESSAGES, {"messages": USER}, f2=M_PUT),
    'first_file': route_seed(R_FIRST_FILE),
}


def route_seeds():
    clear(ROUTE)
    for name, data in sorted(ROUTE_SEEDS.items()):
        write(ROUTE, name, data, ROUTE_MAX_LEN)
    # Finding 4 (docs/fuzzing.md), as the fuzzer wrote it: a refused multipart POST whose body cannot be parsed.
    write(ROUTE, 'refused_multipart_bad_body', b'NSt6locale5\xf3\xa4pp\x00\x16\x1c_ \x01\x03i\x00:', ROUTE_MAX_LEN)

if __name__ == '__main__':
    grammar_seeds()
    toolcall_seeds()
    # Written last (after the toolcall seeds' draws from rng), so the other files stay as they were.
    write(GRAMMAR, 'gbnf_ambiguous_exp', b'\x00' + AMBIGUOUS_GBNF + b'\x00' + b'\x00\x00' * 40)
    write(GRAMMAR, 'schema_ambiguous_exp', b'\x01' + AMBIGUOUS_SCHEMA + b'\x00' + choices(40))
    template_seeds()
    tokenizer_seeds()
    store_seeds()
    request_seeds()
    route_seeds()
