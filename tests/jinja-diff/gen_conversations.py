#!/usr/bin/env python3
"""Seeded random chat requests for the Jinja differential test: plausible and odd message
orders, content as strings / empty / null / missing / lists of parts, nasty unicode, reasoning,
tool calls with object and string arguments, tool results, tool lists with JSON-schema
parameters, and the kwargs the templates in ../shared/testdata/templates read.

The request format is the fixtures' one (../shared/testdata/templates/fixtures/*.json):
{"messages": [...], "tools": [...]?, "add_generation_prompt": bool, "kwargs": {...}}

Usage: gen_conversations.py [--seed N] [--count N] [--out DIR]
Writes DIR/req-<seed>-<i>.json (or prints one request per line to stdout without --out).
Importable: generate(random.Random) -> dict."""

import argparse
import json
import os
import random
import sys

# A request is "tame" (string content, object arguments, described tools, plausible roles: what
# most templates render) or "wild" (anything, most of which some template rejects).
TAME = False

# ---- text ------------------------------------------------------------------------------------

WORDS = ["hello", "weather", "Paris", "the", "function", "call", "result", "ok", "x", "data",
         "tool", "assistant", "user", "system", "reason", "step", "value", "answer", "42",
         "café", "naïve", "Zürich", "test", "a", "I", "you", "is", "not", "none", "None",
         "true", "null", "loop", "end", "if", "for"]

NASTY = [
    "你好，世界", "日本語のテキスト", "한국어", "😀", "👨‍👩‍👧‍👦", "🇫🇷", "1️⃣", "🏳️‍🌈", "👍🏽",
    "e\u0301", "a\u0308\u0323", "\u0301alone", "مرحبا بالعالم", "שלום", "\u202eRTL override\u202c",
    "\u200b", "\u200d", "\ufeff", "\u2028", "\u2029", "\u00a0", "\u3000", "\u00ad",
    "\t", "\r\n", "\r", "\x0b", "\x0c", "\x1b[31m", "\x7f", "\x01\x02", "\u0085",
    "\x1c\x1d\x1e\x1f", "\b", "\u180e", "\u2000\u2005\u200a", "\u205f", "\u1680", "\u202f",
    "\u00a0x\u00a0", "\u0080\u009f", "\ue000", "\U000e0041", "\u2066isolate\u2069",
    "\U0001fa77", "\U0001fae8", "\U00031350", "\u0cf3", "Ǆǅǆ", "ﬀ", "ŉ",
    "'", '"', "\\", "\\n", "\\\"", "`", "'''", '"""', "{{", "}}", "{%", "%}", "{#", "#}",
    "{{ messages }}", "{% if true %}x{% endif %}", "{{'a'}}", "<think>", "</think>",
    "<think>\nhidden\n</think>", "<tool_call>", "</tool_call>", "<tool_response>",
    "</tool_response>", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|start|>",
    "<|channel|>", "<|message|>", "<|end|>", "<|user|>", "<|assistant|>", "[gMASK]",
    "<arg_key>", "</arg_value>", "<function=f>", "<parameter=p>", "&amp;", "<b>bold</b>",
    "%s", "%d", "%%", "%(x)s", "${x}", "$", "\U0010ffff", "\uffff", "\U0001F600\U0001F600",
    "ǅ", "ß", "İ", "ﬁ", "Ω", "µ", "ΣΑΣ", "ǈ", "ᾈ",
]


def word(rng):
    return rng.choice(WORDS)


def text(rng, max_parts=8, allow_empty=True):
    r = rng.random()
    if allow_empty and r < 0.06:
        return ""
    if r < 0.10:
        return rng.choice([" ", "\n", "  \n\t ", "\n\n"])
    parts = []
    for _ in range(rng.randint(1, max_parts)):
        q = rng.random()
        if q < 0.55:
            parts.append(word(rng))
        elif q < 0.85:
            parts.append(rng.choice(NASTY))
        else:
            parts.append(rng.choice(["\n", " ", "  ", "\n\n", ".", ",", "?", "!", ":"]))
    sep = rng.choice([" ", " ", " ", "", "\n"])
    s = sep.join(parts)
    # leading/trailing whitespace matters to trim/strip
    if rng.random() < 0.2:
        s = rng.choice([" ", "\n", "\n\n", "\t", "  "]) + s
    if rng.random() < 0.2:
        s = s + rng.choice([" ", "\n", "\n\n", "\t", "  "])
    return s


def ident(rng):
    return rng.choice(["get_weather", "search", "run_code", "f", "lookup_user", "send-email",
                       "math.add", "ДоПолнить", "天气", "tool_" + str(rng.randint(0, 99)),
                       "x y", "a'b", "q\"q", "_", "very_long_function_name_" * 2])


def key(rng):
    return rng.choice(["location", "unit", "query", "n", "items", "opts", "city", "日期",
                       "emoji😀", "a b", "k'ey", 'k"q', "", "nested", "value", "x", "type",
                       "name", "description", "properties", "required", "enum", "items",
                       "default", "content", "0", "true", "None"])

# ---- JSON values -----------------------------------------------------------------------------


def number(rng):
    return rng.choice([
        0, 1, -1, 42, -7, 2 ** 31, -(2 ** 31), 2 ** 53 + 1, 2 ** 62, -(2 ** 62), 9007199254740993,
        1234567890123456789, 0.0, -0.0, 1.0, 0.5, -2.5, 3.14159, 1e16, 1e-5, 1.5e-7, 1e100,
        -1e-300, 123456789.123, 0.1, 1e15, 12345678901234567.0, 2.0 ** 60, 1 / 3, 5e-324,
        1.7976931348623157e308, rng.randint(-10 ** 6, 10 ** 6), rng.uniform(-1e6, 1e6),
        round(rng.uniform(-100, 100), rng.randint(0, 6)),
    ])


def json_value(rng, depth=0):
    r = rng.random()
    if depth > 2 or r < 0.25:
        return text(rng, 4)
    if r < 0.45:
        return number(rng)
    if r < 0.55:
        return rng.choice([True, False])
    if r < 0.62:
        return None
    if r < 0.82:
        return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {key(rng): json_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def arguments(rng):
    r = rng.random()
    if TAME:
        r *= 0.75
    if r < 0.7:
        return {key(rng): json_value(rng) for _ in range(rng.randint(0, 4))}
    if r < 0.90:
        obj = {key(rng): json_value(rng) for _ in range(rng.randint(0, 3))}
        return json.dumps(obj, ensure_ascii=rng.random() < 0.5)
    if r < 0.93:
        return rng.choice([[1, "a"], 7, None, True, {}])
    return rng.choice(["", "not json", "{}", "[1, 2]", "null", "{\"a\": "])

# ---- schemas and tools -----------------------------------------------------------------------


def schema(rng, depth=0):
    r = rng.random()
    s = {}
    if depth < 2 and r < 0.15:
        s["type"] = "object"
        s["properties"] = {key(rng): schema(rng, depth + 1) for _ in range(rng.randint(0, 3))}
        if s["properties"] and rng.random() < 0.6:
            s["required"] = rng.sample(list(s["properties"]), rng.randint(0, len(s["properties"])))
    elif depth < 2 and r < 0.3:
        s["type"] = "array"
        if rng.random() < 0.8:
            s["items"] = schema(rng, depth + 1)
    elif r < 0.4:
        s["type"] = "string"
        s["enum"] = [text(rng, 2, allow_empty=False) for _ in range(rng.randint(1, 3))]
    elif r < 0.45:
        s["type"] = rng.choice([["string", "null"], ["object", "object"], ["integer"]])
    elif depth < 2 and r < 0.5:
        s["oneOf"] = [schema(rng, depth + 1) for _ in range(rng.randint(1, 3))]
    else:
        s["type"] = rng.choice(["string", "number", "integer", "boolean", "null", "object"])
    if rng.random() < 0.6:
        s["description"] = text(rng, 6)
    if rng.random() < 0.15:
        s["default"] = json_value(rng, 2)
        if rng.random() < 0.5:
            s["default"] = text(rng, 2)
    if rng.random() < 0.1:
        s["nullable"] = rng.choice([True, False])
    if rng.random() < 0.08:
        s["minimum"] = number(rng)
    if rng.random() < 0.05:
        s["title"] = text(rng, 2)
    return s


def tool(rng):
    fn = {"name": ident(rng)}
    if TAME or rng.random() < 0.9:
        fn["description"] = text(rng, 10)
    r = rng.random()
    if r < 0.85:
        params = {"type": "object",
                  "properties": {key(rng): schema(rng, 1) for _ in range(rng.randint(0, 4))}}
        if params["properties"] and rng.random() < 0.7:
            params["required"] = rng.sample(list(params["properties"]),
                                            rng.randint(0, len(params["properties"])))
        if rng.random() < 0.1:
            params["additionalProperties"] = rng.choice([False, True, {"type": "string"}])
        fn["parameters"] = params
    elif r < 0.93:
        fn["parameters"] = {"type": "object"}
    if rng.random() < 0.05:
        fn["strict"] = True
    if not TAME and rng.random() < 0.05:
        return fn  # a bare function, no {"type": "function", "function": ...} wrapper
    return {"type": "function", "function": fn}

# ---- messages --------------------------------------------------------------------------------


def content(rng, role):
    r = rng.random()
    if TAME:
        return text(rng) if r < 0.93 else ""
    if r < 0.62:
        return text(rng)
    if r < 0.70:
        return ""
    if r < 0.78:
        return None
    if r < 0.80:
        return rng.choice([{"type": "text", "text": text(rng)}, 42, True, 1.5])
    parts = []
    for _ in range(rng.randint(0, 4)):
        q = rng.random()
        if q < 0.65:
            parts.append({"type": "text", "text": text(rng)})
        elif q < 0.78:
            parts.append({"type": "image_url", "image_url": {"url": "https://x/y.png"}})
        elif q < 0.88:
            parts.append({"type": "image"})
        elif q < 0.93 and role == "tool":
            parts.append({"output": text(rng)})
        elif q < 0.96:
            parts.append(text(rng, 3))  # a bare string part
        else:
            parts.append({"type": "video"})
    return parts


def tool_call(rng):
    fn = {"name": ident(rng), "arguments": arguments(rng)}
    tc = {"type": "function", "function": fn}
    if rng.random() < 0.8:
        tc["id"] = "call_%d" % rng.randint(0, 10 ** 6)
    if not TAME and rng.random() < 0.05:
        return {"name": fn["name"], "arguments": fn["arguments"]}  # no function wrapper
    return tc


def message(rng, role):
    m = {"role": role}
    if TAME or rng.random() < 0.95:
        m["content"] = content(rng, role)
    if role == "assistant":
        if rng.random() < 0.35:
            m["reasoning_content"] = text(rng) if TAME else rng.choice(
                [text(rng), "", None, text(rng), ["x"], 1])
        if rng.random() < 0.15 and not (TAME and m.get("content")):
            m["thinking"] = text(rng)
        if rng.random() < 0.35:
            m["tool_calls"] = [tool_call(rng) for _ in range(rng.randint(1, 3))]
            if not TAME and rng.random() < 0.05:
                m["tool_calls"] = []
    if role == "tool":
        if rng.random() < 0.6:
            m["tool_call_id"] = "call_%d" % rng.randint(0, 10 ** 6)
        if rng.random() < 0.5:
            m["name"] = ident(rng)
    if role == "user" and rng.random() < 0.03:
        m["name"] = word(rng)
    return m


def plausible(rng):
    msgs = []
    if rng.random() < 0.5:
        msgs.append(message(rng, "system" if TAME else rng.choice(["system"] * 4 + ["developer"])))
    for _ in range(rng.randint(1, 4)):
        msgs.append(message(rng, "user"))
        r = rng.random()
        if r < 0.4:
            a = message(rng, "assistant")
            a.setdefault("tool_calls", [tool_call(rng) for _ in range(rng.randint(1, 3))])
            msgs.append(a)
            for _ in range(max(1, len(a["tool_calls"]) + rng.randint(-1, 1))):
                msgs.append(message(rng, "tool"))
            if rng.random() < 0.7:
                msgs.append(message(rng, "assistant"))
        elif r < 0.85:
            msgs.append(message(rng, "assistant"))
    if rng.random() < 0.5 and msgs[-1]["role"] == "assistant":
        msgs.append(message(rng, "user"))
    return msgs


def odd(rng):
    roles = ["system", "developer", "user", "assistant", "tool", "user", "assistant", "tool",
             "function", "ipython"]
    n = rng.randint(0, 7)
    return [message(rng, rng.choice(roles if rng.random() < 0.97 else roles[:5])) for _ in
            range(n)]


def kwargs(rng):
    k = {}
    if rng.random() < 0.6:
        k["enable_thinking"] = rng.choice([True, False, True, False, None, "false", 0, 1])
    if rng.random() < 0.3:
        k["reasoning_effort"] = rng.choice(["low", "medium", "high", "minimal", "none", ""])
    if rng.random() < 0.1:
        k["builtin_tools"] = rng.sample(["browser", "python", "other"], rng.randint(0, 3))
    if rng.random() < 0.1:
        k["model_identity"] = text(rng, 4)
    if rng.random() < 0.15:
        k["clear_thinking"] = rng.choice([True, False, None])
    if rng.random() < 0.1:
        k["add_vision_id"] = rng.choice([True, False])
    if rng.random() < 0.03:
        k["custom_variable"] = json_value(rng)
    return k


def generate(rng):
    global TAME
    TAME = rng.random() < 0.6
    msgs = plausible(rng) if TAME or rng.random() < 0.7 else odd(rng)
    req = {"messages": msgs}
    r = rng.random()
    if r < 0.4:
        req["tools"] = [tool(rng) for _ in range(rng.randint(1, 4))]
        if not TAME and rng.random() < 0.05:
            req["tools"].append(rng.choice(["a string tool", {"type": "function"}, None]))
    elif r < 0.45:
        req["tools"] = []
    elif r < 0.47:
        req["tools"] = None
    r = rng.random()
    if TAME or r < 0.9:
        req["add_generation_prompt"] = rng.random() < 0.7
    elif r < 0.95:
        req["add_generation_prompt"] = rng.choice([1, 0, "yes", "", None])
    req["kwargs"] = kwargs(rng)
    return req


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
    for i in range(a.count):
        req = generate(random.Random("%d:%d" % (a.seed, i)))
        if a.out:
            with open(os.path.join(a.out, "req-%d-%d.json" % (a.seed, i)), "w",
                      encoding="utf-8") as f:
                json.dump(req, f, ensure_ascii=False, indent=1)
        else:
            print(json.dumps(req, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
