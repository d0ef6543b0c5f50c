#!/usr/bin/env python3
"""Renders a chat template with Jinja2 the way Hugging Face transformers does, as the golden
for Fornace's interpreter.

usage: render_chat_template.py TEMPLATE CASES.json
       render_chat_template.py --random COUNT SEED

TEMPLATE is a tokenizer_config.json (its chat_template, bos_token and eos_token are used) or, with
any other name, a file holding the template text itself. CASES.json is a list of
{"messages": [...], "add_generation_prompt": bool, "tools": [...], "variables": {...}}; "tools"
(optional, else None) is passed as the tools global as given, as apply_chat_template passes a list
of JSON schemas; "variables" (optional) are extra globals such as enable_thinking. Prints one JSON
list (ASCII only), one entry per case: {"text": rendered} or {"error": message}, the message of
any exception the render raises (a template error, or a TypeError such as `'x' in None`, which
apply_chat_template lets through too).

--random makes COUNT random templates that mix text full of spaces and newlines with tags, '-'
and '+' markers, comments, if / for / set and expressions, and prints
{"variables": {...}, "cases": [{"template": ..., "text" or "error": ...}, ...]}.

The environment is transformers' (chat_template_utils._compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols
extension, its tojson filter and the raise_exception global; render() gets tools=None,
documents=None (or the case's tools) and the special tokens that are set (here bos_token and
eos_token).
"""
import json
import random
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def token_text(token):
    """A special token as tokenizer_config.json writes it: a string or {"content": ...}."""
    if isinstance(token, dict):
        return token.get("content")
    return token


def load(path):
    with open(path, encoding="utf-8") as file:
        text = file.read()
    if not path.endswith("tokenizer_config.json"):
        return text, {}
    config = json.loads(text)
    template = config["chat_template"]
    if isinstance(template, list):
        template = next(entry["template"] for entry in template if entry["name"] == "default")
    special = {}
    for name in ("bos_token", "eos_token"):
        value = token_text(config.get(name))
        if value is not None:
            special[name] = value
    return template, special


def make_environment():
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=["jinja2.ext.loopcontrols"])
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    return environment


RANDOM_TEXTS = ["", " ", "  ", "\n", " \n", "\n  ", "\t", "a", " b ", "\n\n", "x\n  ", "\u00a0",
                " \u3000\n", "c\r\n "]
RANDOM_EXPRESSIONS = ["x", "'s'", "1", "x ~ 'q'", "n.v", "l[0]", "l | length", "'  t ' | trim",
                      "x if x else 'no'", "missing", "l[-1] * 2"]


def random_block(generator, depth):
    def text():
        return generator.choice(RANDOM_TEXTS)

    def left():
        return generator.choice(["", "", "-", "+"])

    def right():
        return generator.choice(["", "", "-", "+"])

    parts = []
    for _ in range(generator.randint(1, 4)):
        parts.append(text())
        kind = generator.random()
        if kind < 0.3:
            parts.append("{{%s %s %s}}" % (generator.choice(["", "-"]),
                                           generator.choice(RANDOM_EXPRESSIONS),
                                           generator.choice(["", "-"])))
        elif kind < 0.45:
            parts.append("{#%s note %s#}" % (left(), right()))
        elif kind < 0.65 and depth < 3:
            parts.append("{%%%s if %s %s%%}" % (left(), generator.choice(["x", "not x", "l"]),
                                                right()))
            parts.append(random_block(generator, depth + 1))
            if generator.random() < 0.5:
                parts += [text(), "{%%%s else %s%%}" % (left(), right()),
                          random_block(generator, depth + 1)]
            parts += [text(), "{%%%s endif %s%%}" % (left(), right())]
        elif kind < 0.8 and depth < 3:
            parts.append("{%%%s for i in l %s%%}{{ loop.index }}" % (left(), right()))
            parts.append(random_block(generator, depth + 1))
            parts += [text(), "{%%%s endfor %s%%}" % (left(), right())]
        elif kind < 0.9:
            parts.append("{%%%s set x = %s %s%%}" % (left(), generator.choice(RANDOM_EXPRESSIONS),
                                                     right()))
        parts.append(text())
    return "".join(parts)


def random_cases(count, seed):
    generator = random.Random(seed)
    environment = make_environment()
    variables = {"x": "X", "n": {"v": "V"}, "l": [1, 2]}
    cases = []
    for _ in range(count):
        source = random_block(generator, 0)
        try:
            cases.append({"template": source,
                          "text": environment.from_string(source).render(**variables)})
        except jinja2.exceptions.TemplateError as error:
            cases.append({"template": source, "error": str(error)})
    print(json.dumps({"variables": variables, "cases": cases}))


def main():
    if sys.argv[1] == "--random":
        random_cases(int(sys.argv[2]), int(sys.argv[3]))
        return
    template_source, special_tokens = load(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as file:
        cases = json.load(file)
    template = make_environment().from_string(template_source)
    results = []
    for case in cases:
        try:
            text = template.render(messages=case["messages"], tools=case.get("tools"),
                                   documents=None,
                                   add_generation_prompt=case["add_generation_prompt"],
                                   **special_tokens, **case.get("variables", {}))
            results.append({"text": text})
        except Exception as error:  # pylint: disable=broad-except
            results.append({"error": str(error)})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
