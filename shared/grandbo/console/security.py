"""The console's doors: who may open it, from which page, and what its pages may do.

- Login: a one-time token printed by `grandbo console` opens one session, the operator's
  (signing with the key the console was started with); a person's own sign-in link
  (`grandbo people link`) opens a session of theirs as often as it is followed, until it
  expires or they are removed or renewed, and that session signs with their key and ends
  the moment the keyring no longer holds it. Following a person's link only asks "sign in
  as ...?": the session opens on the page's own POST, so a link someone else sends (their
  own, to have a teammate act under their name) signs nobody in unseen. Each session is
  an HttpOnly, SameSite=Strict cookie the browser sends to this console only; signing
  out ends that session only.
- Every state-changing request carries the session's CSRF token in its form and an
  Origin of the console itself; a request naming any other Host is refused, so a page
  that rebinds its own DNS name to 127.0.0.1 reaches nothing (DNS rebinding).
- Every answer forbids framing, inline script and any source but the console's own
  (Content-Security-Policy: the one script is the console's static picker.js, which
  only fetches the console's own /picker), sniffing, referrers and caching.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp

from grandbo.api.auth import Keyring, SigningKey
from grandbo.api.people import is_sign_in_token, still_holds, verify_sign_in_token
from grandbo.errors import AuthenticationError, GrandboError

SESSION_COOKIE = "grandbo_console"
SESSION_TTL_S = 12 * 3600
# what the console holds at most: a person's link may be followed again and again (each a
# session of 12 hours); past these, the oldest sessions give way to the new one
MAX_SESSIONS_PER_PERSON = 20
MAX_SESSIONS = 2000
CSRF_FIELD = "csrf"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
    "img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # not no-referrer: under it Chromium sends `Origin: null` with the pages' own forms
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
_SAFE_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True, slots=True)
class Session:
    session_id: str
    csrf_token: str
    expires_at: float
    # the person's key the session signs with; None: the operator's (the console's own)
    key: SigningKey | None = None

    @classmethod
    def new(cls, key: SigningKey | None = None) -> Session:
        """A fresh session (its id and CSRF token random), good for SESSION_TTL_S."""
        return cls(
            secrets.token_urlsafe(32), secrets.token_urlsafe(32), time.time() + SESSION_TTL_S, key
        )


class ConsoleDoors:
    """The one-time login token, the sessions it opened, and the allowed Hosts."""

    def __init__(
        self,
        hosts: Iterable[str],
        *,
        login_token: str | None = None,
        cookie_name: str = SESSION_COOKIE,
        keyring: Callable[[], Keyring] | None = None,
        tenant_id: str | None = None,
    ) -> None:
        self.hosts = frozenset(host.lower() for host in hosts)
        self.cookie_name = cookie_name
        # https too: an --allowed-host is a tunnel, which serves the console over TLS
        self.origins = frozenset(
            f"{scheme}://{host}" for host in self.hosts for scheme in ("http", "https")
        )
        self.login_token: str | None = login_token or secrets.token_urlsafe(32)
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        # the keyring as it stands now (people's sign-in links; None: the operator's only)
        self._keyring = keyring
        self._tenant_id = tenant_id  # people of this organization only

    def _current_keyring(self) -> Keyring | None:
        if self._keyring is None:
            return None
        try:
            return self._keyring()
        except GrandboError:  # no keyring file, or none readable: no person signs in
            return None

    def person_of(self, token: str) -> SigningKey | None:
        """The person of this organization a sign-in token proves, as the keyring holds
        them now; None for any other token. Opens no session."""
        keyring = self._current_keyring()
        if keyring is None or not is_sign_in_token(token):
            return None
        try:
            key = verify_sign_in_token(keyring, token)
        except AuthenticationError:
            return None
        if self._tenant_id is not None and key.tenant_id != self._tenant_id:
            return None
        return key

    def _person_session(self, token: str) -> Session | None:
        keyring = self._current_keyring()
        key = self.person_of(token)
        if key is None or keyring is None:
            return None
        session = Session.new(key)
        with self._lock:
            self._forget(keyring)
            theirs = [s for s in self._sessions.values() if s.key and s.key.key_id == key.key_id]
            self._drop_oldest(theirs, len(theirs) - MAX_SESSIONS_PER_PERSON + 1)
            self._drop_oldest(list(self._sessions.values()), len(self._sessions) - MAX_SESSIONS + 1)
            self._sessions[session.session_id] = session
        return session

    def _forget(self, keyring: Keyring) -> None:
        """Drop sessions past their lifetime, and people's sessions whose key the keyring
        no longer holds (removed, renewed, re-roled). Called with the lock held."""
        now = time.time()
        for session_id, held in list(self._sessions.items()):
            if held.expires_at < now or (
                held.key is not None and not still_holds(keyring, held.key)
            ):
                del self._sessions[session_id]

    def _drop_oldest(self, sessions: list[Session], count: int) -> None:
        """End the `count` oldest of `sessions` (the operator's is never among them)."""
        people = sorted((s for s in sessions if s.key is not None), key=lambda s: s.expires_at)
        for held in people[: max(count, 0)]:
            self._sessions.pop(held.session_id, None)

    def session_count(self) -> int:
        with self._lock:
            return len(self._sessions)

    def log_in(self, token: str) -> Session | None:
        """A new session: a person's, if `token` is their sign-in link's (which works
        again); else the operator's, if it is the one-time login token (then spent)."""
        if is_sign_in_token(token):
            return self._person_session(token)
        with self._lock:
            expected = self.login_token
            if expected is None or not hmac.compare_digest(token.encode(), expected.encode()):
                return None
            self.login_token = None
            session = Session.new()
            self._sessions[session.session_id] = session
            return session

    def session(self, request: Request) -> Session | None:
        cookie = request.cookies.get(self.cookie_name)
        if not cookie:
            return None
        with self._lock:
            session = self._sessions.get(cookie)
            if session is None:
                return None
            if session.expires_at < time.time():
                del self._sessions[cookie]
                return None
        if session.key is not None:
            keyring = self._current_keyring()
            if keyring is None or not still_holds(keyring, session.key):
                self.log_out(session)  # removed, renewed or re-roled: signed out for good
                return None
        return session

    def log_out(self, session: Session) -> None:
        with self._lock:
            self._sessions.pop(session.session_id, None)

    @staticmethod
    def csrf_holds(session: Session, sent: object) -> bool:
        return isinstance(sent, str) and hmac.compare_digest(
            sent.encode(), session.csrf_token.encode()
        )

    def refusal(self, request: Request) -> str | None:
        """Why a request is refused before any route sees it, or None."""
        host = request.headers.get("host", "").lower()
        if host not in self.hosts:
            return f"this console answers only as {', '.join(sorted(self.hosts))}"
        if request.method not in _SAFE_METHODS:
            origin = request.headers.get("origin")
            if origin is None or origin.lower() not in self.origins:
                return "a state-changing request must come from the console's own pages"
        return None


class DoorsMiddleware:
    """Refuse foreign Hosts and cross-origin writes; put the security headers on every
    answer (refusals included)."""

    def __init__(self, app: ASGIApp, doors: ConsoleDoors) -> None:
        self.app = app
        self.doors = doors

    async def __call__(self, scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.doors.refusal(Request(scope))
        if refusal is not None:
            response: Response = PlainTextResponse(refusal, status_code=403)
            _secure(response.headers)
            await response(scope, receive, send)
            return

        async def secured(message):  # type: ignore[no-untyped-def]
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [
                    (name.lower().encode(), value.encode())
                    for name, value in SECURITY_HEADERS.items()
                    if name.lower().encode() not in names
                ]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, secured)


def _secure(headers: object) -> None:
    for name, value in SECURITY_HEADERS.items():
        headers[name] = value  # type: ignore[index]
