#!/usr/bin/env python3
"""Renders a chat request with a chat template through Python Jinja2, configured as Hugging Face
transformers configures it (and as ../shared/testdata/templates/manifest.json describes):
ImmutableSandboxedEnvironment(trim_blocks, lstrip_blocks, loopcontrols, a pass-through
{% generation %} tag), tojson = json.dumps(ensure_ascii=False, ...), raise_exception,
strftime_now on a fixed clock (2026-01-15 12:00), and the variables messages, tools,
documents=None, add_generation_prompt, the template's special tokens, then the request's kwargs.

Usage: render_jinja2.py --template FILE.jinja --request REQ.json [--clock fixed|system]
                        [--special NAME] [--manifest PATH]
Prints the rendering to stdout (exact bytes). Exit 0 on success; 3 when the template fails
(raise_exception's TemplateError or any other Jinja2/Python error while rendering), with
"<kind>: <message>" on stderr; 2 on bad usage or unreadable input.

Also importable: Renderer(template_text, special_tokens, clock).render(request) returns
("ok", text) or ("error", kind, message)."""

import argparse
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED_CLOCK = datetime.datetime(2026, 1, 15, 12, 0, 0)
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_MANIFEST = os.path.normpath(
    os.path.join(HERE, "..", "..", "..", "shared", "testdata", "templates", "manifest.json"))


class GenerationPassthrough(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %} renders its body in place (transformers'
    AssistantTracker without the mask bookkeeping)."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation"), [], [], body).set_lineno(lineno)

    def _generation(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def make_environment(clock="fixed"):
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[GenerationPassthrough, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    if clock == "fixed":
        env.globals["strftime_now"] = lambda fmt: FIXED_CLOCK.strftime(fmt)
    else:
        env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env


def special_tokens_for(template_path, manifest_path=DEFAULT_MANIFEST):
    """The special tokens manifest.json lists for this template (by file stem); {} if none."""
    stem = os.path.basename(template_path)
    if stem.endswith(".jinja"):
        stem = stem[:-len(".jinja")]
    try:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    except OSError:
        return {}
    return dict(manifest.get("renderer", {}).get("special_tokens", {}).get(stem, {}))


class Renderer:
    def __init__(self, template_text, special_tokens=None, clock="fixed"):
        self.env = make_environment(clock)
        self.template = self.env.from_string(template_text)
        self.special = dict(special_tokens or {})

    def variables(self, request):
        tools = request.get("tools")
        v = {
            "messages": request.get("messages"),
            "tools": tools if tools is not None else None,
            "documents": None,
            "add_generation_prompt": request.get("add_generation_prompt", False),
        }
        # transformers: render(messages=, tools=, documents=, add_generation_prompt=,
        # **special_tokens_map, **kwargs): later keys win
        v.update(self.special)
        kwargs = request.get("kwargs") or {}
        v.update(kwargs)
        return v

    def render(self, request):
        try:
            return ("ok", self.template.render(**self.variables(request)))
        except jinja2.exceptions.UndefinedError as e:
            return ("error", "UndefinedError", str(e))
        except jinja2.exceptions.TemplateError as e:
            return ("error", type(e).__name__, str(e))
        except Exception as e:  # TypeError, KeyError ... the template failed in Python
            return ("error", type(e).__name__, str(e))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--template", required=True)
    ap.add_argument("--request", required=True)
    ap.add_argument("--clock", choices=("fixed", "system"), default="fixed",
                    help="strftime_now's clock: the manifest's fixed 2026-01-15 12:00 (default) "
                         "or the system clock")
    ap.add_argument("--manifest", default=DEFAULT_MANIFEST)
    ap.add_argument("--special", help="manifest special_tokens entry (default: template stem)")
    a = ap.parse_args(argv)
    try:
        with open(a.template, encoding="utf-8") as f:
            text = f.read()
        with open(a.request, encoding="utf-8") as f:
            request = json.load(f)
    except (OSError, ValueError) as e:
        print("render_jinja2: %s" % e, file=sys.stderr)
        return 2
    special = special_tokens_for(a.special or a.template, a.manifest)
    try:
        r = Renderer(text, special, a.clock)
    except jinja2.exceptions.TemplateSyntaxError as e:
        print("TemplateSyntaxError: %s" % e, file=sys.stderr)
        return 3
    res = r.render(request)
    if res[0] == "ok":
        sys.stdout.buffer.write(res[1].encode("utf-8", "surrogatepass"))
        sys.stdout.flush()
        return 0
    print("%s: %s" % (res[1], res[2]), file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
