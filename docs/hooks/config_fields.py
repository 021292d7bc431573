"""mkdocs hook: a config class's fields as a table (name, type, default, help), from the dataclass itself.

A page writes ``<!-- config-fields: trl_verigate.trainers.verigate.VeriGateConfig -->`` where the table goes. The
table lists the fields the class and its trl-verigate bases define (a GRPOConfig subclass leaves out TRL's and
transformers' fields, which their own docs describe), each with the help text of its ``metadata={"help": ...}``, so
the reference cannot drift from the code.
"""

from __future__ import annotations

import dataclasses
import html
import importlib
import re

MARKER = re.compile(r"<!--\s*config-fields:\s*([\w.]+)\s*-->")
# A single-backtick span; runs of backticks (a ```lean4 fence named in a help) stay literal text.
CODE_SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
# The package whose classes' fields are listed; fields that only a base class of another package defines are not.
PACKAGE = "trl_verigate"


def load(dotted: str) -> type:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def own_fields(cls: type) -> list[dataclasses.Field]:
    """The dataclass fields declared by ``cls`` or a base class of this package, in definition order."""
    ours = {
        name
        for klass in cls.__mro__
        if klass.__module__.split(".")[0] == PACKAGE
        for name in klass.__dict__.get("__annotations__", {})
    }
    return [field for field in dataclasses.fields(cls) if field.name in ours]


def default_text(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        return repr(field.default)
    factory = field.default_factory
    if factory is dataclasses.MISSING:
        return "required"
    if factory in (list, dict, tuple, set):
        return repr(factory())
    return f"{getattr(factory, '__name__', 'computed')}() (computed when the config is made)"


def code(text: str) -> str:
    return f"<code>{html.escape(text)}</code>"


def help_html(text: str) -> str:
    """The help text, escaped, with its `code spans` as code."""
    parts = CODE_SPAN.split(text)
    return "".join(code(part) if index % 2 else html.escape(part) for index, part in enumerate(parts))


def fields_table(dotted: str) -> str:
    cls = load(dotted)
    rows = []
    for field in own_fields(cls):
        help_text = field.metadata.get("help") or "(no help of its own: see the class description above)"
        cells = (
            code(field.name),
            code(field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))),
            code(default_text(field)),
            help_html(" ".join(help_text.split())),
        )
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    header = "<tr><th>field</th><th>type</th><th>default</th><th>help</th></tr>"
    return (
        f'<table class="config-fields" data-config="{html.escape(dotted)}">\n<thead>{header}</thead>\n<tbody>\n'
        + "\n".join(rows)
        + "\n</tbody>\n</table>"
    )


def on_page_markdown(markdown: str, page, config, files) -> str:
    return MARKER.sub(lambda match: fields_table(match.group(1)), markdown)
