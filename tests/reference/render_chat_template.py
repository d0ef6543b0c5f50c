#!/usr/bin/env python3
"""Renders a chat template with Jinja2 the way Hugging Face transformers does, as the golden
for Fornace's interpreter.

usage: render_chat_template.py TEMPLATE CASES.json

TEMPLATE is a tokenizer_config.json (its chat_template, bos_token and eos_token are used) or, with
any other name, a file holding the template text itself. CASES.json is a list of
{"messages": [...], "add_generation_prompt": bool, "variables": {...}}; "variables" (optional)
are extra globals such as enable_thinking. Prints one JSON list (ASCII only), one entry per case:
{"text": rendered} or {"error": message}.

The environment is transformers' (chat_template_utils._compile_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols
extension, its tojson filter and the raise_exception global; render() gets tools=None,
documents=None and the special tokens that are set (here bos_token and eos_token).
"""
import json
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


def main():
    template_source, special_tokens = load(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as file:
        cases = json.load(file)
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=["jinja2.ext.loopcontrols"])
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    template = environment.from_string(template_source)
    results = []
    for case in cases:
        try:
            text = template.render(messages=case["messages"], tools=None, documents=None,
                                   add_generation_prompt=case["add_generation_prompt"],
                                   **special_tokens, **case.get("variables", {}))
            results.append({"text": text})
        except jinja2.exceptions.TemplateError as error:
            results.append({"error": str(error)})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
