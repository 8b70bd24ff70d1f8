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


# The reference's order: what a caller does first comes first. Each route is in one
# task (a route in none fails the build: `_task_of`).
TASKS: list[tuple[str, str, tuple[str, ...]]] = [
    (
        "Ask memory",
        "What Beacon, a chat or an agent calls: a question in, ranked lessons out, each "
        "with its confidence; a lesson by id; a verdict on one after the investigation.",
        (
            "POST /v1/memory/query",
            "GET /v1/memory/entries/{entry_id}",
            "POST /v1/memory/entries/{entry_id}/feedback",
            "POST /v1/admin/query",
            "POST /v1/admin/explanation",
        ),
    ),
    (
        "Write lessons",
        "Add, correct, retire and keep lessons by hand (closed incidents arrive by "
        "EventBridge, not over HTTP: see Deploying to AWS).",
        (
            "POST /v1/admin/entries",
            "GET /v1/admin/entries/{entry_id}",
            "POST /v1/admin/entries/{entry_id}/corrections",
            "POST /v1/admin/entries/{entry_id}/retirement",
            "POST /v1/admin/entries/{entry_id}/promotion",
            "GET /v1/admin/entries/{entry_id}/history",
        ),
    ),
    (
        "Curate",
        "Keep the lake honest: find, merge and split what says the same thing, review "
        "what is stale, remove what must go, read what was asked.",
        (
            "POST /v1/admin/catalog",
            "GET /v1/admin/review",
            "GET /v1/admin/duplicates",
            "POST /v1/admin/entries/{entry_id}/merge",
            "POST /v1/admin/entries/{entry_id}/distinct",
            "POST /v1/admin/entries/{entry_id}/merge-policy",
            "GET /v1/admin/entries/{entry_id}/recurrences",
            "POST /v1/admin/entries/{entry_id}/split",
            "POST /v1/admin/entries/{entry_id}/redaction",
            "POST /v1/admin/retrievals",
            "POST /v1/admin/retrievals/incidents",
            "POST /v1/admin/retrievals/{retrieval_id}/removal",
            "POST /v1/admin/verdicts/{verdict_id}/removal",
            "POST /v1/admin/verdicts/{verdict_id}/note-removal",
            "GET /v1/admin/health",
            "POST /v1/admin/health/repair",
            "GET /v1/admin/growth",
        ),
    ),
    (
        "Run the organization",
        "Its settings and calibration, its people, moving its lake, and purging it.",
        (
            "GET /v1/admin/whoami",
            "GET /v1/admin/settings",
            "POST /v1/admin/settings",
            "POST /v1/admin/calibration",
            "GET /v1/admin/people",
            "POST /v1/admin/people",
            "POST /v1/admin/people/link",
            "POST /v1/admin/people/revocation",
            "POST /v1/admin/people/removal",
            "POST /v1/admin/export",
            "POST /v1/admin/import",
            "POST /v1/admin/purge",
            "POST /v1/admin/purge/confirmation",
        ),
    ),
    (
        "Topology",
        "The services and their dependencies: what a lesson's service touches, what is "
        "critical, what a change would reach.",
        (
            "POST /v1/admin/topology",
            "POST /v1/admin/topology/nodes",
            "POST /v1/admin/topology/dependencies",
            "POST /v1/admin/topology/blast-radius",
            "POST /v1/admin/topology/criticality",
            "GET /v1/topology/blast-radius",
            "GET /v1/topology/criticality",
        ),
    ),
]

# One curl per task, as a person pastes it next to `make run` (the local gateway on its
# default port; `grandbo token` and `grandbo sign` print the credentials)
CURLS = {
    task: " \\\n  ".join(parts)
    for task, parts in {
        "Ask memory": [
            "TOKEN=$(.venv/bin/grandbo token)\ncurl -s http://127.0.0.1:8787/v1/memory/query",
            "-H \"Authorization: Bearer $TOKEN\" -H 'Content-Type: application/json'",
            """-d '{"topic": "payments cannot get a database connection and requests time """
            """out after a deploy", "limit": 3}'""",
        ],
        "Write lessons": [
            ".venv/bin/grandbo sign POST /v1/admin/entries --curl --body",
            """'{"title": "Shard rebalancing saturated disks", "summary": "Adding two nodes """
            """started shard relocation that saturated disk IO; queries timed out.", """
            """"service": "search-api", "tags": ["Elasticsearch"]}' | sh""",
        ],
        "Curate": [
            ".venv/bin/grandbo sign POST /v1/admin/catalog --curl",
            """--body '{"status": "active", "limit": 10}' | sh""",
        ],
        "Run the organization": [".venv/bin/grandbo sign GET /v1/admin/settings --curl | sh"],
        "Topology": [
            ".venv/bin/grandbo sign POST /v1/admin/topology/nodes --curl --body '{}' | sh"
        ],
    }.items()
}


def _auth(operation: dict[str, Any], path: str) -> str:
    schemes = [name for item in operation.get("security", []) for name in item]
    if "queryToken" in schemes:
        return "the query token: `Authorization: Bearer gbq1...` (`grandbo token`)"
    role = operation.get("x-grandbo-role", "admin")
    iam = "/v1/iam/" + path.removeprefix("/v1/")
    return (
        f"a signed admin request (`x-grandbo-*` headers, `grandbo sign`), a key of role "
        f"**{role}** or above; in AWS a person also calls it as `{iam}` with SigV4"
    )


def _task_of(route: str) -> str:
    for task, _, routes in TASKS:
        if route in routes:
            return task
    raise SystemExit(f"docs/reference/generate.py: {route} is in no task of TASKS")


def http_api(document: dict[str, Any]) -> str:
    info = document.get("info", {})
    schemes = document.get("components", {}).get("securitySchemes", {})
    lines = [
        "# HTTP API",
        "",
        f"{_cell(info.get('description', ''))}",
        "",
        f"Generated from `docs/openapi.json` (version {info.get('version', '?')}), which "
        "`grandbo openapi` generates from the handlers; a test holds the two equal, and "
        "another that every status a route answers is listed under it.",
        "",
        "Contents: " + " · ".join(f"[{task}](#{_anchor(task)})" for task, _, _ in TASKS),
        "",
        "## Calling it",
        "",
        "Locally, `make run` serves every route on `http://127.0.0.1:8787` and prints a "
        "token and a signed request ready to paste. In AWS, the stack's API Gateway URL "
        "(the `ApiUrl` output).",
        "",
        "| who | how | routes |",
        "|---|---|---|",
        "| an agent asking memory | `Authorization: Bearer <token>`: "
        f"{_cell(schemes.get('queryToken', {}).get('description', ''))} | `/v1/memory/*`, "
        "`GET /v1/topology/*` |",
        "| a service or a person's key (HMAC) | `x-grandbo-key-id`, `x-grandbo-timestamp`, "
        "`x-grandbo-nonce`, `x-grandbo-signature`: "
        f"{_cell(schemes.get('adminSignature', {}).get('description', ''))} "
        "`grandbo sign METHOD PATH --body '...' --curl` prints the whole command. | "
        "`/v1/admin/*` |",
        "| a person signed in to AWS (IAM Identity Center) | AWS's own signature (SigV4) "
        "on `/v1/iam/admin/*`, the same routes and bodies; the permission set names the "
        "organization and the role (Deploying to AWS) | `/v1/iam/admin/*` |",
        "",
        "A write may carry `Idempotency-Key`: the same key again is a no-op answered 200 "
        "(signed with the request). Every refusal is one JSON body, "
        '`{"error": "...", "message": "...", "field": "..."}`; a 429 or a '
        "503 says when to retry in `Retry-After` (seconds).",
        "",
    ]
    schemas = document.get("components", {}).get("schemas", {})
    routes: dict[str, list[tuple[str, str, dict[str, Any]]]] = {t: [] for t, _, _ in TASKS}
    for path, operations in document.get("paths", {}).items():
        for method in METHODS:
            if (operation := operations.get(method)) is not None:
                route = f"{method.upper()} {path}"
                routes[_task_of(route)].append((route, path, operation))
    for task, about, order in TASKS:
        lines += [f"## {task}", "", about, "", "```sh", CURLS[task], "```", ""]
        for route, path, operation in sorted(routes[task], key=lambda r: order.index(r[0])):
            lines += _route(route, path, operation, schemas)
    return "\n".join(lines) + "\n"


def _anchor(title: str) -> str:
    return title.lower().replace(" ", "-")


def _route(route: str, path: str, operation: dict[str, Any], schemas: dict[str, Any]) -> list[str]:
    lines = [f"### `{route}`", ""]
    if description := operation.get("description"):
        lines += [description.strip(), ""]
    lines += [f"Auth: {_auth(operation, path)}.", ""]
    body = operation.get("requestBody", {}).get("content", {})
    name = _schema_name(body.get("application/json", {}).get("schema", {}))
    if name and name in schemas:
        lines += _fields(f"Request body (`{name}`)", schemas[name])
        lines += [
            "Example:",
            "",
            "```json",
            json.dumps(_example(schemas[name], schemas)),
            "```",
            "",
        ]
    answers = operation.get("responses", {})
    for status in ("200", "201"):
        content = answers.get(status, {}).get("content", {}).get("application/json", {})
        answer = _schema_name(content.get("schema", {}))
        if answer and answer in schemas:
            lines += _fields(f"Answer {status} (`{answer}`)", schemas[answer])
            example = json.dumps(_example(schemas[answer], schemas), indent=1)
            lines += ["<details><summary>Example answer</summary>", "", "```json", example]
            lines += ["```", "", "</details>", ""]
            break
    if answers:
        lines += ["| status | meaning |", "|---|---|"]
        for status, answer in sorted(answers.items()):
            retry = " (`Retry-After`)" if "Retry-After" in answer.get("headers", {}) else ""
            lines.append(f"| {status} | {_cell(answer.get('description', ''))}{retry} |")
        lines.append("")
    return lines


def _example(schema: dict[str, Any], schemas: dict[str, Any], depth: int = 0) -> Any:
    """A value of `schema` for the reference: its own example or default where it has
    one, else one made from its type (the first of a choice, the required fields)."""
    if "$ref" in schema:
        return _example(schemas[_schema_name(schema)], schemas, depth)
    for key in ("examples", "example"):
        if key in schema:
            value = schema[key]
            return value[0] if key == "examples" and isinstance(value, list) else value
    if "default" in schema and schema["default"] is not None:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    choices = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    if choices:
        return _example(choices[0], schemas, depth)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        if depth > 3:
            return {}
        required = set(schema.get("required", []))
        return {
            field: _example(spec, schemas, depth + 1)
            for field, spec in schema.get("properties", {}).items()
            if field in required or (depth == 0 and ("examples" in spec or "example" in spec))
        }
    if kind == "array":
        return [] if depth > 3 else [_example(schema.get("items", {}), schemas, depth + 1)]
    if kind == "integer":
        return schema.get("minimum", 1)
    if kind == "number":
        return schema.get("minimum", 0.5)
    if kind == "boolean":
        return False
    if schema.get("format") == "uuid":
        return "3f2a9c1e-8b7d-4e5f-9a0b-1c2d3e4f5a6b"
    if schema.get("format") == "date-time":
        return "2026-12-06T09:30:00Z"
    return "..."


def _fields(title: str, schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    if not properties:
        return []
    required = set(schema.get("required", []))
    lines = [f"{title}:", "", "| field | type | required | description |", "|---|---|---|---|"]
    for field, spec in properties.items():
        kind = (
            spec.get("type")
            or _schema_name(spec)
            or " or ".join(
                str(s.get("type", _schema_name(s) or "object")) for s in spec.get("anyOf", [])
            )
        )
        if kind == "array" and (item := _schema_name(spec.get("items", {}))):
            kind = f"array of {item}"
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


def quickstart(readme: str) -> str:
    """The README's sections from its quickstart to its troubleshooting, as a page of the
    site (the README is the one text: this page is made from it at build time), its links
    to docs/ pages made the site's own."""
    start = readme.index("\n## Quickstart\n")
    end = readme.index("\n## Where things live\n")
    body = readme[start:end].replace("](docs/", "](")
    return (
        "# Quickstart\n\n"
        "From the repository's README (the same text, made into this page when the site is "
        "built): run Grandbo on your machine, ask it a first question, add a lesson, connect "
        "an agent.\n" + body.replace("\n## Quickstart\n", "\n## Run it\n", 1)
    )


with mkdocs_gen_files.open("quickstart.md", "w") as page:
    page.write(quickstart((ROOT / "README.md").read_text()))
with mkdocs_gen_files.open("reference/http-api.md", "w") as page:
    page.write(http_api(json.loads((ROOT / "docs" / "openapi.json").read_text())))
with mkdocs_gen_files.open("reference/cli.md", "w") as page:
    page.write(command_line(build_parser()))
