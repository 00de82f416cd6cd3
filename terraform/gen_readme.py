#!/usr/bin/env python3
"""Regenerates the Inputs/Outputs tables of every terraform README.md (terraform-docs style).

    python terraform/gen_readme.py

The tables sit between the BEGINNING/END OF PRE-COMMIT-TERRAFORM DOCS HOOK markers; text outside
them is hand-written and kept. Needs python-hcl2 (pip install python-hcl2). terraform-docs
produces the same tables where it is installed.
"""

import pathlib
import re
import sys

import hcl2

BEGIN = "<!-- BEGINNING OF PRE-COMMIT-TERRAFORM DOCS HOOK -->"
END = "<!-- END OF PRE-COMMIT-TERRAFORM DOCS HOOK -->"
ROOT = pathlib.Path(__file__).resolve().parent


def _text(value):
    if isinstance(value, str):
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        elif value.startswith("${") and value.endswith("}"):
            value = value[2:-1]
        return value.replace('\\"', '"')
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if not isinstance(value, (list, dict)) else _compound(value)


def _compound(value):
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    items = {k: v for k, v in value.items() if k != "__is_block__"}
    return "{" + ", ".join(f"{_text(k)} = {_text(v)}" for k, v in items.items()) + "}"


def _cell(value):
    return re.sub(r"\s+", " ", value).replace("|", "\\|")


def _blocks(directory, kind):
    out = {}
    for path in sorted(directory.glob("*.tf")):
        with open(path) as f:
            for block in hcl2.load(f).get(kind, []):
                for label, body in block.items():
                    out[_text(label)] = body
    return out


def tables(directory):
    lines = [BEGIN, "## Inputs", "", "| Name | Description | Type | Default | Required |",
             "|------|-------------|------|---------|:--------:|"]
    for name, body in sorted(_blocks(directory, "variable").items()):
        has_default = "default" in body
        default = f"`{_cell(_text(body['default']))}`" if has_default else "n/a"
        lines.append(f"| {name} | {_cell(_text(body.get('description', '')))} | "
                     f"`{_cell(_text(body['type']))}` | {default} | "
                     f"{'no' if has_default else 'yes'} |")
    lines += ["", "## Outputs", "", "| Name | Description |", "|------|-------------|"]
    for name, body in sorted(_blocks(directory, "output").items()):
        lines.append(f"| {name} | {_cell(_text(body.get('description', '')))} |")
    lines.append(END)
    return "\n".join(lines)


def main():
    for versions in sorted(ROOT.rglob("versions.tf")):
        directory = versions.parent
        readme = directory / "README.md"
        text = readme.read_text() if readme.exists() else f"# {directory.name}\n\n{BEGIN}\n{END}\n"
        if BEGIN not in text:
            text = text.rstrip("\n") + f"\n\n{BEGIN}\n{END}\n"
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        readme.write_text(head + tables(directory) + tail)
        print(f"wrote {readme.relative_to(ROOT.parent)}", file=sys.stderr)


if __name__ == "__main__":
    main()
