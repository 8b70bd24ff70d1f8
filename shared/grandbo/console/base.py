"""What every console page shares: the admin API as the session's person (each call in
a worker thread), the templates with their filters, and the page wrapper that answers the
API's and the console's refusals as a page. The page modules (`app`, `entry_pages`,
`people_pages`) build on it; it imports none of them."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, get_args

import jinja2
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from grandbo.api.auth import PersonRole
from grandbo.api.client import GrandboHTTPError
from grandbo.api.models import QueryRequest
from grandbo.console.backend import ConsoleBackend, UnreadableAnswerError
from grandbo.console.forms import ConsoleError
from grandbo.console.security import CSRF_FIELD, ConsoleDoors, Session
from grandbo.text.tags import tag_words

CONSOLE_DIR = Path(__file__).parent
# what a redirect after an action says; the page shows only these fixed sentences
DONE = {
    "created": "Entry created: found by its words now, by its meaning once the embed worker "
    "has made its vector (it runs after each write: seconds).",
    "corrected": "A new revision was recorded: it is at the top of the history. Its vector "
    "is made again by the embed worker (seconds); its words are searched now.",
    "retired": "Entry retired.",
    "promoted": "Entry promoted: it is durable now and no longer expires.",
    "split": "Recurrence split back out: it is its own entry again (never merged again).",
    "never-merge": "Merge policy recorded.",
    "merged": "Merged: the entry is a recurrence of the other now (split reverses it).",
    "redacted": "Redacted: the entry's text is gone for good; its tombstone stays.",
    "question_removed": "Removed: the question is gone from the log; who removed it, when, "
    "why and its digest stay.",
    "note_removed": "Removed: the note reads [redacted]; the verdict stands; who removed it, "
    "when, why and its digest stay.",
    "verdict_removed": "Removed: the verdict is counted no more and no refit reads it; who "
    "removed it, when and why stay.",
    "distinct": "Recorded as two lessons: the pair is not suggested again.",
    "settings": "Settings saved.",
    "person_revoked": "Key renewed: every link and session of theirs has ended. Give them a "
    "new link when they should sign in again.",
    "person_removed": "Removed: their next request is refused, and their sessions have ended.",
}
# the query's scopes, from the API's own request model (one source: a scope the API adds
# is offered here too)
SCOPES: tuple[str, ...] = tuple(
    value
    for option in get_args(QueryRequest.model_fields["scope"].annotation)
    for value in get_args(option)
)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(CONSOLE_DIR / "templates"),
        autoescape=True,  # every value is text written by someone else
        undefined=jinja2.StrictUndefined,
    )
    env.globals["DONE"] = DONE
    env.globals["SCOPES"] = SCOPES
    env.filters["likelihood"] = likelihood
    env.filters["words_of"] = words_of
    env.filters["breakable"] = breakable
    env.filters["short_time"] = short_time
    return env


# where a long identifier or address may wrap in a narrow table cell: after its separators
_SEPARATOR = re.compile(r"([@./_:-]+)")


def breakable(value: object) -> Markup:
    """An identifier or address that wraps at its separators only (`ann@` `example.` `com`),
    never inside a word: a word-break opportunity after each, the text escaped."""
    parts = _SEPARATOR.split(str(value))
    return Markup("").join(
        Markup("{}<wbr>").format(part) if _SEPARATOR.fullmatch(part) else Markup("{}").format(part)
        for part in parts
    )


def short_time(value: object) -> Markup:
    """An ISO time as a person scans a column (`2026-12-06 09:30`, one line), the whole
    value on hover and for machines (`<time datetime>`)."""
    text = str(value or "")
    if len(text) < 16 or text[10] not in "T ":
        return Markup("{}").format(text)
    return Markup('<time datetime="{0}" title="{0}">{1}\u00a0{2}</time>').format(
        text, text[:10], text[11:16]
    )


# A confidence in words beside its number (issue 45): the floor is a few percent, so a hit
# of a tenth is worth reading, and one of a half more likely right than not
LIKELY, POSSIBLE = 0.5, 0.1


def likelihood(confidence: float | None) -> str:
    """`likely`, `possible` or `weak`, for a person reading a hit's confidence."""
    if confidence is None:
        return "unknown"
    if confidence >= LIKELY:
        return "likely"
    return "possible" if confidence >= POSSIBLE else "weak"


def words_of(tags: list[str], *texts: str) -> list[str]:
    """Tags (stems, as the search matches them) shown as the words of `texts` they stand
    for (`inventori` reads `inventory`); a tag no text holds stays as it is."""
    words = tag_words(" ".join(texts))
    return [words.get(tag, tag) for tag in tags]


Page = Callable[[Request, Session], Awaitable[Response]]


class _InThreads:
    """The backend's calls, each awaited in a worker thread: a request waiting for a slow
    API (a cold start, a calibration, an address that never answers, up to the client's
    timeout) holds its own page only, never the console's event loop and every other page."""

    def __init__(self, backend: ConsoleBackend) -> None:
        self._backend = backend

    def __getattr__(self, name: str) -> Callable[..., Awaitable[dict[str, Any]]]:
        call = getattr(self._backend, name)

        async def in_thread(*args: Any, **kwargs: Any) -> dict[str, Any]:
            answer: dict[str, Any] = await run_in_threadpool(call, *args, **kwargs)
            return answer

        return in_thread


class ConsoleBase:
    """What every page shares, over one organization's admin key (`ConsoleBackend`):
    the API as the session's person, the templates, and the page wrapper."""

    def __init__(self, backend: ConsoleBackend, doors: ConsoleDoors) -> None:
        self.backend = backend
        self._operator = _InThreads(backend)
        self._people: dict[tuple[str, str], _InThreads] = {}
        self.doors = doors
        self.env = _environment()

    def api(self, session: Session) -> _InThreads:
        """The admin API as the session's person (their own key), or as the operator."""
        if session.key is None:
            return self._operator
        held = (session.key.key_id, session.key.secret)
        api = self._people.get(held)
        if api is None:  # a renewed key replaces the one it renewed
            api = _InThreads(self.backend.signing_with(session.key))
            self._people = {k: v for k, v in self._people.items() if k[0] != held[0]}
            self._people[held] = api
        return api

    # -- plumbing ------------------------------------------------------------------

    def render(
        self, request: Request, session: Session | None, name: str, status: int = 200, **values: Any
    ) -> HTMLResponse:
        key = None if session is None else session.key
        html = self.env.get_template(name).render(
            csrf=None if session is None else session.csrf_token,
            person=self.backend.person if key is None else key.person,
            role=self.role_of(session),
            operator_key=self.backend.key_id,
            via=self.backend.via if key is None else "key",
            csrf_field=CSRF_FIELD,
            organization=self.backend.tenant_id,
            api=self.backend.base_url,
            path=request.url.path,
            done=DONE.get(request.query_params.get("done", "")),
            **values,
        )
        return HTMLResponse(html, status_code=status)

    def role_of(self, session: Session | None) -> PersonRole | None:
        """The role the session acts in: its person's, or the operator key's."""
        key = None if session is None else session.key
        return self.backend.role if key is None else key.person_role

    def _refused(
        self,
        request: Request,
        session: Session,
        status: int,
        status_code: int,
        error: str,
        message: str,
        field: object = None,
    ) -> HTMLResponse:
        """A refusal (the API's or the console's) as the error page."""
        return self.render(
            request,
            session,
            "error.html",
            status,
            status_code=status_code,
            error=error,
            message=message,
            field=field,
        )

    def page(self, handler: Page) -> Callable[[Request], Awaitable[Response]]:
        """A route that needs a session (else to the login page), answers the API's and
        the console's refusals as a page, and checks the CSRF token of every POST."""

        async def endpoint(request: Request) -> Response:
            session = self.doors.session(request)
            if session is None:
                return RedirectResponse("/login", status_code=303)
            try:
                if request.method == "POST":
                    form = await request.form()
                    if not self.doors.csrf_holds(session, form.get(CSRF_FIELD)):
                        raise ConsoleError(403, "the form's CSRF token is missing or wrong")
                return await handler(request, session)
            except GrandboHTTPError as exc:
                status = exc.status if 400 <= exc.status < 500 else 502
                body = exc.body
                return self._refused(
                    request,
                    session,
                    status,
                    exc.status,
                    str(body.get("error", "")),
                    str(body.get("message", "")),
                    body.get("field"),
                )
            except ConsoleError as exc:
                return self._refused(
                    request,
                    session,
                    exc.status,
                    exc.status,
                    "invalid_request",
                    exc.message,
                    exc.field,
                )
            except (OSError, TimeoutError) as exc:
                message = f"the admin API did not answer: {exc}"
                return self._refused(request, session, 502, 502, "unavailable", message)
            except UnreadableAnswerError as exc:
                message = f"what answered at {self.backend.base_url} is not the admin API: {exc}"
                return self._refused(request, session, 502, 502, "bad_gateway", message)

        return endpoint
