"""The console's entry pages: the catalog, a new entry, one entry with its history and
its actions (correct, retire, promote, split, merge after a preview, redact, distinct),
and the id pickers' suggestions. Each action is one signed request of the session's
person (`Console.api`)."""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from grandbo.api.client import GrandboHTTPError
from grandbo.console.base import ConsoleBase
from grandbo.console.diff import revision_diffs
from grandbo.console.forms import (
    ConsoleError,
    entry_id_of,
    form_key_of,
    redirect_done,
    tags_of,
    text_of,
    whole_number,
)
from grandbo.console.security import Session

# what a person types to confirm a redaction (entry.html's field asks for the same word)
REDACT_WORD = "REDACT"


class EntryPages:
    """The entry pages, rendered and signed by their `ConsoleBase`."""

    def __init__(self, console: ConsoleBase) -> None:
        self.console = console

    async def entries(self, request: Request, session: Session) -> Response:
        params = request.query_params
        filters: dict[str, Any] = {
            name: params[name]
            for name in ("status", "kind", "origin", "service", "text", "after")
            if params.get(name)
        }
        page = await self.console.api(session).catalog({**filters, "limit": 50})
        kept = {k: v for k, v in filters.items() if k != "after"}
        return self.console.render(
            request,
            session,
            "entries.html",
            filters=kept,
            page=page,
            next_query=None if not page["next"] else urlencode({**kept, "after": page["next"]}),
        )

    async def new_entry(self, request: Request, session: Session) -> Response:
        if request.method == "GET":
            # prefilled from a question memory could not answer (the unanswered page)
            given = {
                name: request.query_params.get(name, "")[:2000]
                for name in ("title", "summary", "incident_id", "service")
            }
            return self.console.render(
                request,
                session,
                "new_entry.html",
                form_key=secrets.token_hex(16),
                given={**given, "tags": "", "kind": "durable"},
                refused=None,
            )
        form = await request.form()
        entry: dict[str, Any] = {
            "title": text_of(form, "title"),
            "summary": text_of(form, "summary"),
            "tags": tags_of(form),
            "kind": text_of(form, "kind") or "durable",
        }
        for optional in ("service", "incident_id"):
            if text_of(form, optional):
                entry[optional] = text_of(form, optional)
        # one key per form shown: a resubmitted form is a no-op, not a second entry
        try:
            created = await self.console.api(session).create(entry, key=form_key_of(form))
        except GrandboHTTPError as exc:
            if exc.status not in _REFUSED_FORM:
                raise
            # the form comes back as it was typed, the reason in words above it
            typed = {**entry, "tags": ", ".join(entry["tags"])}
            return self.console.render(
                request,
                session,
                "new_entry.html",
                exc.status,
                form_key=secrets.token_hex(16),
                given={name: typed.get(name, "") for name in _NEW_ENTRY_FIELDS},
                refused=refusal_in_words(exc.body),
            )
        return redirect_done(f"/entries/{created['entry']['entry_id']}", "created")

    async def entry(self, request: Request, session: Session) -> Response:
        return await self._entry_page(request, session, request.path_params["entry_id"])

    async def _entry_page(
        self,
        request: Request,
        session: Session,
        entry_id: UUID,
        *,
        typed: dict[str, Any] | None = None,
        status: int = 200,
        refused: str | None = None,
    ) -> Response:
        """The entry, its history with a word diff per revision, and its actions; with
        `typed`, the correction a person typed over a revision someone else changed since
        (a 409), kept in the form beside the text that is current now."""
        history = await self.console.api(session).history(entry_id)
        entry = history["entry"]
        # off the event loop: a long history must not hold up every other session's page
        diffs = await run_in_threadpool(revision_diffs, history["events"])
        return self.console.render(
            request,
            session,
            "entry.html",
            status,
            history=history,
            entry=entry,
            given_tags=given_tags_of(entry),
            form_key=secrets.token_hex(16),
            diffs=diffs,
            typed=typed,
            refused=refused,
            current_author=next(
                (
                    e["actor"]
                    for e in reversed(history["events"])
                    if e["revision"] == entry["revision"]
                ),
                None,
            ),
        )

    async def act(self, request: Request, session: Session) -> Response:
        """One action on one entry, by the form's `action`: each is one signed request."""
        entry_id: UUID = request.path_params["entry_id"]
        action = request.path_params["action"]
        form = await request.form()
        back = text_of(form, "back") or f"/entries/{entry_id}"
        if not back.startswith("/") or back.startswith("//"):
            back = f"/entries/{entry_id}"
        if action == "correct":
            text: dict[str, Any] = {
                "title": text_of(form, "title"),
                "summary": text_of(form, "summary"),
                "tags": tags_of(form),
            }
            # the form shows the service: a field left empty clears it (a correction keeps
            # what it does not name, and the form names every field it shows)
            text["service"] = text_of(form, "service") or None
            if text_of(form, "expected_revision"):
                text["expected_revision"] = whole_number(
                    form.get("expected_revision"), "expected_revision"
                )
            try:
                await self.console.api(session).correct(entry_id, text, key=form_key_of(form))
            except GrandboHTTPError as exc:
                conflict = exc.status == 409 and exc.body.get("error") == "revision_conflict"
                if not conflict and exc.status not in _REFUSED_FORM:
                    raise
                # someone else's revision came first, or the text was refused: what this
                # person typed is kept in the form
                typed = {**text, "tags": ", ".join(text["tags"])}
                return await self._entry_page(
                    request,
                    session,
                    entry_id,
                    typed=typed,
                    status=exc.status,
                    refused=None if conflict else refusal_in_words(exc.body),
                )
            return redirect_done(back, "corrected")
        if action == "retire":
            retirement: dict[str, Any] = {"reason": text_of(form, "reason")}
            if text_of(form, "superseded_by"):
                retirement["superseded_by"] = str(
                    entry_id_of(text_of(form, "superseded_by"), "superseded_by")
                )
            await self.console.api(session).retire(entry_id, retirement)
            return redirect_done(back, "retired")
        if action == "promote":
            await self.console.api(session).promote(entry_id)
            return redirect_done(back, "promoted")
        if action == "split":
            await self.console.api(session).split(entry_id)
            return redirect_done(back, "split")
        if action == "never-merge":
            await self.console.api(session).set_never_merge(
                entry_id, text_of(form, "never_merge") == "true"
            )
            return redirect_done(back, "never-merge")
        if action == "merge":
            into = entry_id_of(text_of(form, "into"), "into")
            if text_of(form, "confirm") != "yes":
                return await self._merge_preview(request, session, entry_id, into, back)
            await self.console.api(session).merge(entry_id, into)
            return redirect_done(back, "merged")
        if action == "redact":
            reason = text_of(form, "reason")
            if not reason:
                raise ConsoleError(400, "a redaction needs its reason", "reason")
            if text_of(form, "confirm") != REDACT_WORD:
                raise ConsoleError(
                    400, f"type {REDACT_WORD} to confirm: the text is removed for good", "confirm"
                )
            also = [line.strip() for line in text_of(form, "also").splitlines() if line.strip()]
            await self.console.api(session).redact(entry_id, reason, also)
            return redirect_done(back, "redacted")
        if action == "distinct":
            await self.console.api(session).mark_distinct(
                entry_id, entry_id_of(text_of(form, "other"), "other")
            )
            return redirect_done(back, "distinct")
        raise ConsoleError(404, f"no such action: {action}")

    async def _merge_preview(
        self, request: Request, session: Session, entry_id: UUID, into: UUID, back: str
    ) -> Response:
        """Both texts side by side, and what the agent is answered afterwards, before a
        merge is confirmed."""
        if into == entry_id:
            raise ConsoleError(400, "an entry is not merged into itself", "into")
        merged = (await self.console.api(session).history(entry_id))["entry"]
        kept = (await self.console.api(session).history(into))["entry"]
        return self.console.render(
            request,
            session,
            "merge_preview.html",
            merged=merged,
            kept=kept,
            seen_after=kept["seen_count"] + merged["seen_count"],
            back=back,
        )

    async def picker(self, request: Request, session: Session) -> Response:
        """Entries whose title or summary holds the text typed so far (the id pickers'
        suggestions): id, title, status; at most ten, the newest first."""
        typed = request.query_params.get("text", "").strip()[:200]
        if len(typed) < 2:
            return JSONResponse({"entries": []})
        filters: dict[str, Any] = {"text": typed, "limit": 10}
        if request.query_params.get("status") in ("active",):
            filters["status"] = "active"
        page = await self.console.api(session).catalog(filters)
        return JSONResponse(
            {
                "entries": [
                    {"entry_id": e["entry_id"], "title": e["title"], "status": e["status"]}
                    for e in page["entries"]
                ]
            }
        )


# What a form's refusal is re-rendered for (the form kept, the reason above it); any other
# status is the error page
_REFUSED_FORM = (400, 413, 422)
_NEW_ENTRY_FIELDS = ("title", "summary", "service", "tags", "incident_id", "kind")


def refusal_in_words(body: dict[str, Any]) -> str:
    """An API refusal as a person reads it: the message, without its code (`invalid_input:`)
    and naming the field in words ("summary: ..." reads "Summary: ...")."""
    message = str(body.get("message") or body.get("error") or "refused")
    field, sep, rest = message.partition(": ")
    if sep and field == body.get("field"):
        message = f"{field.replace('_', ' ').capitalize()}: {rest}"
    return message


def given_tags_of(entry: dict[str, Any]) -> list[str]:
    """The tags an entry was given, as written (a correction's form offers them again, and
    sends what the person left in the field)."""
    return list(entry.get("tags") or [])
