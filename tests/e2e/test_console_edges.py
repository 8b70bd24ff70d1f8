"""`grandbo console` at its edges (issue 26, red team): pointed at something that is not
the admin API (`--url` of a website, a proxy's page, a broken server), bound to IPv6
loopback, and two consoles open in one browser (the local store and a deployed stack)."""

from __future__ import annotations

import http.client
import http.cookiejar
import re
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlencode, urlsplit

import pytest

from grandbo.api.auth import SigningKey, new_secret
from grandbo.commands.console import RunningConsole, bind_console, check_deployed_key
from grandbo.console.security import CONTENT_SECURITY_POLICY
from grandbo.errors import GrandboError

KEY = SigningKey(key_id="acme-admin", tenant_id="acme", secret=new_secret(), roles=["admin"])
TOPIC = "checkout requests time out waiting for a database connection from the pool"


@contextmanager
def _answering(answer: bytes, *, delay_s: float = 0.0) -> Iterator[str]:
    """A server that answers every request with `answer` (after `delay_s`), whatever was
    asked."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                stop.wait(delay_s)
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/prod"
    finally:
        stop.set()
        listener.close()


def _started(console: RunningConsole) -> RunningConsole:
    console.serve_in_background()
    return console


def _login(console: RunningConsole, host: str = "127.0.0.1") -> str:
    parts = urlsplit(console.link)
    conn = http.client.HTTPConnection(host, parts.port, timeout=10)
    try:
        conn.request("GET", f"{parts.path}?{parts.query}", headers={"Host": parts.netloc})
        response = conn.getresponse()
        response.read()
        assert response.status == 303, response.status
        return str(response.getheader("set-cookie")).split(";")[0]
    finally:
        conn.close()


def _get(console: RunningConsole, path: str, cookie: str) -> tuple[int, dict[str, str], str]:
    parts = urlsplit(console.link)
    conn = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=30)
    try:
        conn.request("GET", path, headers={"Host": parts.netloc, "Cookie": cookie})
        response = conn.getresponse()
        headers = {name.lower(): value for name, value in response.getheaders()}
        return response.status, headers, response.read().decode()
    finally:
        conn.close()


NOT_THE_API = {
    "a website": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 13\r\n"
    b"\r\n<html></html>",
    "a JSON array": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]",
    "no HTTP at all": b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
    "a cut answer": b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{",
}


@pytest.mark.parametrize("what", sorted(NOT_THE_API))
def test_an_api_url_that_is_not_the_admin_api_is_a_page_not_a_500(what: str) -> None:
    with _answering(NOT_THE_API[what]) as url:
        console = _started(bind_console(url, KEY, port=0))
        try:
            cookie = _login(console)
            for path in ("/?" + urlencode({"topic": TOPIC}), "/growth", "/settings", "/review"):
                status, headers, page = _get(console, path, cookie)
                assert status == 502, (what, path, status, page[:200])
                # its answer was not the API's (or, cut, the connection reset: no answer)
                assert "not the admin API" in page or "did not answer" in page
                assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        finally:
            console.server.should_exit = True


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback here")
def test_the_link_printed_for_ipv6_loopback_opens_the_console() -> None:
    with _answering(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n") as url:
        console = _started(bind_console(url, KEY, host="::1", port=0))
        try:
            assert console.link.startswith("http://[::1]:")
            # a browser sends the link's own host, `[::1]:port`
            _login(console, host="::1")
        finally:
            console.server.should_exit = True


def test_two_consoles_in_one_browser_keep_their_own_sessions() -> None:
    """A cookie is not bound to a port: opening a second console must not end the first's
    session (its login link is spent: it could not be opened again)."""
    with _answering(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n") as url:
        local = _started(bind_console(url, KEY, port=0))
        deployed = _started(bind_console(url, KEY, port=0))
        try:
            jar = http.cookiejar.CookieJar()  # a browser's cookie rules: by host, not port
            browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
            for console in (local, deployed):
                with browser.open(console.link, timeout=10) as page:
                    assert page.url.endswith("/"), page.url  # logged in, on the search page
            for console in (local, deployed):
                with browser.open(console.link.split("/login")[0] + "/", timeout=10) as page:
                    assert "/login" not in page.url, "the other console's login ended this one"
        finally:
            local.server.should_exit = True
            deployed.server.should_exit = True


def test_a_tunnel_named_by_allowed_host_may_post_over_https() -> None:
    """`--allowed-host` names a tunnel; a tunnel serves TLS, so its pages' forms send an
    https Origin. The console's own POSTs from there are taken; another origin's are not."""
    tunnel = "console.tunnel.example"
    with _answering(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n") as url:
        console = _started(bind_console(url, KEY, port=0, allowed_hosts=[tunnel]))
        try:
            parts = urlsplit(console.link)

            def send(path: str, headers: dict[str, str], body: str | None = None):  # type: ignore[no-untyped-def]
                conn = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=10)
                try:
                    method = "GET" if body is None else "POST"
                    conn.request(method, path, body=body, headers={"Host": tunnel, **headers})
                    response = conn.getresponse()
                    return response.status, response.getheader("set-cookie"), response.read()
                finally:
                    conn.close()

            status, cookie, _ = send(f"{parts.path}?{parts.query}", {})
            assert status == 303
            session = {"Cookie": str(cookie).split(";")[0]}
            _, _, page = send("/", session)
            found = re.search(rb'name="csrf" value="([^"]+)"', page)
            assert found is not None
            form = urlencode({"csrf": found.group(1).decode()})
            posted = {**session, "Content-Type": "application/x-www-form-urlencoded"}
            status, _, _ = send("/logout", {**posted, "Origin": "https://evil.example"}, form)
            assert status == 403
            status, _, _ = send("/logout", {**posted, "Origin": f"https://{tunnel}"}, form)
            assert status == 303
        finally:
            console.server.should_exit = True


def test_a_slow_api_does_not_hold_the_other_pages() -> None:
    """A search waiting for a slow API (a cold start, a calibration, an address that never
    answers) leaves the console answering everything else: its stylesheet, its login page,
    another tab."""
    slow = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
    with _answering(slow, delay_s=4.0) as url:
        console = _started(bind_console(url, KEY, port=0))
        try:
            cookie = _login(console)
            waiting = threading.Thread(
                target=_get, args=(console, "/?" + urlencode({"topic": TOPIC}), cookie)
            )
            waiting.start()
            time.sleep(0.3)  # the search is waiting for the API now
            started = time.monotonic()
            status, _, _ = _get(console, "/static/console.css", cookie)
            status_login, _, _ = _get(console, "/login", "")
            took = time.monotonic() - started
            assert (status, status_login) == (200, 200)
            assert took < 2.0, f"the console answered only after the API did ({took:.1f} s)"
            waiting.join(10)
        finally:
            console.server.should_exit = True


def test_a_key_the_deployed_api_refuses_stops_the_console_before_it_opens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    refused = (
        b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: 63\r\n"
        b'\r\n{"error": "unauthorized", "message": "the request is not auth"}'
    )
    with (
        _answering(refused) as url,
        pytest.raises(GrandboError, match="refused admin key 'acme-admin'"),
    ):
        check_deployed_key(url, KEY)
    # an API that is not up yet only warns: the console may open before it wakes
    with _answering(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n") as url:
        check_deployed_key(url, KEY)
    assert "answered HTTP 503" in capsys.readouterr().err
    with pytest.raises(GrandboError, match="--url"):
        check_deployed_key("ftp://example.test/prod", KEY)


def test_plain_http_beyond_this_machine_is_warned_about(
    capsys: pytest.CaptureFixture[str],
) -> None:
    check_deployed_key("http://grandbo-console.invalid/prod", KEY)  # never resolves
    assert "plain http beyond this machine" in capsys.readouterr().err
