"""The site's generated reference pages (mkdocs-gen-files, at build time): the HTTP API
from docs/openapi.json (itself generated from the handlers: `grandbo openapi`) and the
command line from grandbo's own parser. Nothing here is written twice."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import mkdocs_gen_files

from grandbo.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
METHODS = ("get", "post", "put", "patch", "delete")


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _schema_name(schema: dict[str, Any]) -> str:
    ref = schema.get("$ref") or next(
        (s.get("$ref") for s in schema.get("anyOf", []) if "$ref" in s), None
    )
    return str(ref).rsplit("/", 1)[-1] if ref else ""


def http_api(document: dict[str, Any]) -> str:
    info = document.get("info", {})
    lines = [
        "# HTTP API",
        "",
        f"{_cell(info.get('description', ''))}",
        "",
        f"Generated from `docs/openapi.json` (version {info.get('version', '?')}), which "
        "`grandbo openapi` generates from the handlers; a test holds the two equal.",
        "",
    ]
    schemas = document.get("components", {}).get("schemas", {})
    for path, operations in sorted(document.get("paths", {}).items()):
        for method in METHODS:
            operation = operations.get(method)
            if operation is None:
                continue
            lines += [f"## `{method.upper()} {path}`", ""]
            if summary := operation.get("summary"):
                lines += [_cell(summary), ""]
            if description := operation.get("description"):
                lines += [description.strip(), ""]
            role = operation.get("x-grandbo-role")
            if role:
                lines += [f"Least role: **{role}**.", ""]
            body = operation.get("requestBody", {}).get("content", {})
            schema = body.get("application/json", {}).get("schema", {})
            name = _schema_name(schema)
            if name and name in schemas:
                lines += _fields(name, schemas[name])
            answers = operation.get("responses", {})
            if answers:
                lines += ["| status | meaning |", "|---|---|"]
                lines += [
                    f"| {status} | {_cell(answer.get('description', ''))} |"
                    for status, answer in sorted(answers.items())
                ]
                lines.append("")
    return "\n".join(lines) + "\n"


def _fields(name: str, schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    if not properties:
        return []
    required = set(schema.get("required", []))
    lines = [
        f"Body (`{name}`):",
        "",
        "| field | type | required | description |",
        "|---|---|---|---|",
    ]
    for field, spec in properties.items():
        kind = spec.get("type") or " or ".join(
            str(s.get("type", _schema_name(s) or "object")) for s in spec.get("anyOf", [])
        )
        lines.append(
            f"| `{field}` | {_cell(kind)} | {'yes' if field in required else 'no'} | "
            f"{_cell(spec.get('description', ''))} |"
        )
    return [*lines, ""]


def command_line(parser: argparse.ArgumentParser) -> str:
    lines = [
        "# Command line",
        "",
        "Generated from `grandbo`'s own parser (`grandbo.cli.build_parser`): every command "
        "and option as `grandbo COMMAND --help` prints it.",
        "",
        "```text",
        parser.format_help().rstrip(),
        "```",
        "",
    ]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in sorted(action.choices.items()):
                lines += [f"## `grandbo {name}`", "", "```text", sub.format_help().rstrip()]
                lines += ["```", ""]
                lines += _nested(sub, f"grandbo {name}")
    return "\n".join(lines) + "\n"


def _nested(parser: argparse.ArgumentParser, prefix: str) -> list[str]:
    lines: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in sorted(action.choices.items()):
                lines += [f"### `{prefix} {name}`", "", "```text", sub.format_help().rstrip()]
                lines += ["```", ""]
    return lines


with mkdocs_gen_files.open("reference/http-api.md", "w") as page:
    page.write(http_api(json.loads((ROOT / "docs" / "openapi.json").read_text())))
with mkdocs_gen_files.open("reference/cli.md", "w") as page:
    page.write(command_line(build_parser()))
