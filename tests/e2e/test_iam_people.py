"""People signed in with their organization's identity (issue 36, point 2): the admin
function, given an event API Gateway authorized with AWS's signature, takes the person,
organization and role from the verified identity and the stack's mapping, never from the
request; the local gateway, which cannot verify SigV4, refuses the /v1/iam routes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from functions.admin_api.handler import lambda_handler as admin_handler

from grandbo.api.auth import Keyring
from grandbo.api.iam_people import IamPeople
from grandbo.errors import AuthenticationError
from grandbo.local.runner import lambda_context, proxy_event
from grandbo.runtime.lambda_container import LambdaEnvironment, LambdaRuntime, install_runtime
from grandbo.storage.connections import DatabaseUrls

from .conftest import Gateway

ACCOUNT = "123456789012"
LESSON = {
    "title": "Ledger replica lag hid the refunds",
    "summary": "The ledger's read replica lagged during the batch and refunds looked missing.",
}


def _arn(permission_set: str, session: str) -> str:
    role = f"AWSReservedSSO_{permission_set}_0a1b2c3d4e5f6a7b"
    return f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{session}"


@pytest.fixture
def iam_runtime(database: DatabaseUrls, tenant: str, other_tenant: str) -> Iterator[None]:
    mapping = {
        "permission_sets": [
            {"permission_set": "GrandboCurators", "tenant_id": tenant, "role": "curator"},
            {"permission_set": "Grandbo_Viewers", "tenant_id": tenant, "role": "viewer"},
            {"permission_set": "OtherAdmins", "tenant_id": other_tenant, "role": "admin"},
        ]
    }
    env = LambdaEnvironment.model_validate(
        {
            "DATABASE_URL": database.app,
            "GRANDBO_EMBEDDING_PROVIDER": "fake",
            "GRANDBO_IAM_PEOPLE": json.dumps(mapping),
        }
    )
    install_runtime(LambdaRuntime(env, keyring=Keyring([]), containers=1))
    yield
    from grandbo.runtime.lambda_container import runtime

    runtime().close()
    install_runtime(None)


def _call(method: str, path: str, body: Any, user_arn: str | None) -> tuple[int, dict[str, Any]]:
    raw = b"" if body is None else json.dumps(body).encode()
    event = proxy_event(method, path, {"Content-Type": "application/json"}, raw)
    event["requestContext"]["identity"] = {"sourceIp": "10.0.0.1", "userArn": user_arn}
    answer = admin_handler(event, lambda_context("grandbo-admin", ACCOUNT))
    return answer["statusCode"], json.loads(answer["body"])


@pytest.mark.usefixtures("iam_runtime")
def test_a_person_of_identity_center_acts_as_themselves(tenant: str, other_tenant: str) -> None:
    curator = _arn("GrandboCurators", "Ann@Example.com")
    status, me = _call("GET", "/v1/iam/admin/whoami", None, curator)
    assert status == 200, me
    assert me == {
        "organization": tenant,
        "actor": "person:ann@example.com",
        "person": "ann@example.com",
        "role": "curator",
        "via": "iam",
    }
    status, created = _call("POST", "/v1/iam/admin/entries", LESSON, curator)
    assert status == 201, created
    entry_id = created["entry"]["entry_id"]
    # a second create without an Idempotency-Key is a second entry (each request its own)
    status, again = _call("POST", "/v1/iam/admin/entries", LESSON, curator)
    assert status in (200, 201), again
    status, history = _call("GET", f"/v1/iam/admin/entries/{entry_id}/history", None, curator)
    assert status == 200
    assert [e["actor"] for e in history["events"]] == ["person:ann@example.com"]

    # a viewer reads and may not write; the role is the mapping's, whatever the body says
    viewer = _arn("Grandbo_Viewers", "vic@example.com")
    assert _call("GET", f"/v1/iam/admin/entries/{entry_id}", None, viewer)[0] == 200
    status, refused = _call("POST", "/v1/iam/admin/entries", {**LESSON, "role": "admin"}, viewer)
    assert status == 403
    assert "role viewer may not" in refused["message"]
    # another organization's admin sees none of it
    other = _arn("OtherAdmins", "eve@example.com")
    assert _call("GET", f"/v1/iam/admin/entries/{entry_id}", None, other)[0] == 404
    # a purge stays with an admin signing key (its confirmation is that key's HMAC)
    status, purge = _call("POST", "/v1/iam/admin/purge", {"organization": other_tenant}, other)
    assert status == 400
    assert "signing key" in purge["message"]


@pytest.mark.usefixtures("iam_runtime")
def test_an_identity_the_stack_does_not_map_is_refused() -> None:
    for arn in (
        _arn("SomeoneElsesSet", "ann@example.com"),  # a permission set not mapped
        f"arn:aws:sts::{ACCOUNT}:assumed-role/GrandboCurators/ann@example.com",  # not SSO
        _arn("GrandboCurators", "i-0123456789abcdef0"),  # a session that is no person
        f"arn:aws:iam::{ACCOUNT}:user/ann",  # an IAM user
        # the mapped permission set's name, but a role of another account
        _arn("GrandboCurators", "ann@example.com").replace(ACCOUNT, "210987654321"),
        # a role someone named like Identity Center's, without its unique suffix
        f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSReservedSSO_GrandboCurators/ann@example.com",
        f"arn:aws:sts::{ACCOUNT}:assumed-role/AWSReservedSSO_GrandboCurators_mine/a@example.com",
        None,
    ):
        status, refused = _call("GET", "/v1/iam/admin/whoami", None, arn)
        assert status == 403, arn
        assert "none of Grandbo's people" in refused["message"]


def test_the_mapping_reads_the_role_name_as_identity_center_writes_it() -> None:
    people = IamPeople.from_json(
        json.dumps(
            {"permission_sets": [{"permission_set": "A_B", "tenant_id": "acme", "role": "admin"}]}
        )
    )
    caller = people.caller(_arn("A_B", "x@example.com"), ACCOUNT)
    assert (caller.tenant_id, caller.role, caller.person, caller.via) == (
        "acme",
        "admin",
        "x@example.com",
        "iam",
    )
    assert "x@example.com" not in caller.key_id  # logged with every request
    with pytest.raises(AuthenticationError):
        people.caller(_arn("A", "x@example.com"), ACCOUNT)  # a prefix of a mapped name
    with pytest.raises(AuthenticationError, match="another account"):
        people.caller(_arn("A_B", "x@example.com"), "000000000000")


def test_the_local_gateway_refuses_the_iam_routes(gateway: Gateway, tenant: str) -> None:
    reply = gateway.request(
        "GET", "/v1/iam/admin/whoami", None, {"Authorization": "AWS4-HMAC-SHA256 Credential=x"}
    )
    assert reply.status == 403
    assert "verified by API Gateway in AWS" in reply.body["message"]


class _SigV4Gateway:
    """What API Gateway does on an AWS_IAM route, in this test: recompute the request's
    SigV4 signature with the caller's credentials, refuse it (403) unless it matches, and
    run the admin function with the identity it proves."""

    def __init__(self, credentials: Any, region: str, user_arn: str) -> None:
        import http.server
        import threading

        gateway = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _serve(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                gateway.seen.append((self.command, self.path, dict(self.headers)))
                path = self.path.removeprefix("/prod")
                if not gateway.verified(self.command, self.path, dict(self.headers), body):
                    status, answer = (
                        403,
                        {"message": "The request signature we calculated does not match"},
                    )
                else:
                    event = proxy_event(self.command, path, dict(self.headers), body)
                    event["requestContext"]["identity"]["userArn"] = gateway.user_arn
                    result = admin_handler(event, lambda_context("grandbo-admin", ACCOUNT))
                    status, answer = result["statusCode"], json.loads(result["body"])
                raw = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

        self.credentials, self.region, self.user_arn = credentials, region, user_arn
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/prod"

    def verified(self, method: str, path: str, headers: dict[str, str], body: bytes) -> bool:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        authorization = headers.get("Authorization", "")
        if not authorization.startswith("AWS4-HMAC-SHA256 "):
            return False
        fields = dict(
            part.strip().split("=", 1)
            for part in authorization.removeprefix("AWS4-HMAC-SHA256 ").split(",")
        )
        names = fields["SignedHeaders"].split(";")
        if "host" not in names or "x-amz-date" not in names:
            return False
        kept = {k: v for k, v in headers.items() if k.lower() in names}
        request = AWSRequest(
            method=method, url=f"http://{headers['Host']}{path}", data=body, headers=kept
        )
        request.context["timestamp"] = headers["X-Amz-Date"]
        auth = SigV4Auth(self.credentials, "execute-api", self.region)
        expected = auth.signature(
            auth.string_to_sign(request, auth.canonical_request(request)), request
        )
        return bool(expected == fields["Signature"])


def _console_pages(backend: Any, *paths: str) -> list[str]:
    """The console's pages at `paths` over `backend`, signed in with its login link."""
    import http.cookiejar
    import urllib.request

    from grandbo.commands.console import bind_console

    running = bind_console(backend.base_url, None, port=0, backend=backend)
    running.serve_in_background()
    try:
        deadline = time.monotonic() + 10
        while not running.server.started:
            assert time.monotonic() < deadline, "the console did not start"
            time.sleep(0.02)
        browser = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        browser.open(running.link, timeout=10).close()  # the login sets the session's cookie
        origin = running.link.split("/login")[0]
        pages = []
        for path in paths:
            with browser.open(origin + path, timeout=10) as answer:
                pages.append(answer.read().decode())
        return pages
    finally:
        running.server.should_exit = True


@pytest.mark.usefixtures("iam_runtime")
def test_the_console_signs_in_with_an_aws_identity(tenant: str) -> None:
    from botocore.credentials import Credentials

    from grandbo.console.backend import ConsoleBackend

    credentials = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "token-1")
    gateway = _SigV4Gateway(credentials, "eu-west-1", _arn("GrandboCurators", "ann@example.com"))
    try:
        backend = ConsoleBackend.over_iam(gateway.url, credentials, "eu-west-1")
        assert (backend.tenant_id, backend.key_id) == (tenant, "person:ann@example.com")
        assert (backend.person, backend.role, backend.via) == ("ann@example.com", "curator", "iam")
        created = backend.create(LESSON, key="console:" + "ab" * 8)
        entry_id = created["entry"]["entry_id"]
        (page,) = _console_pages(backend, f"/entries/{entry_id}")
        # the header shows the identity's person and role, not the operator's "admin"
        assert "<code>ann@example.com</code> · role <strong>curator</strong>" in page
        assert "your AWS identity's signature" in page
        assert f'action="/entries/{entry_id}/correct"' in page
        assert f'action="/entries/{entry_id}/redact"' not in page  # admins only
        history = backend.history(created["entry"]["entry_id"])
        assert [e["actor"] for e in history["events"]] == ["person:ann@example.com"]
        # every request went to the /v1/iam twin, SigV4-signed with the session's token
        assert {path.split("/")[3] for _, path, _ in gateway.seen} == {"iam"}
        assert all(h.get("X-Amz-Security-Token") == "token-1" for _, _, h in gateway.seen)
        # another secret's signature does not hold
        wrong = Credentials("AKIDEXAMPLE", "not-the-secret", "token-1")
        with pytest.raises(Exception, match="403"):
            ConsoleBackend.over_iam(gateway.url, wrong, "eu-west-1")
    finally:
        gateway.server.shutdown()


@pytest.mark.parametrize(
    "whoami",
    [
        {"actor": "person:a@example.com", "role": "admin"},  # no organization
        {"organization": None, "actor": "x", "role": "admin"},
        {"organization": "acme", "actor": "", "role": "admin"},
        {"organization": "acme", "actor": "x", "person": {"a": 1}, "role": "viewer"},
        {"organization": "acme", "actor": "x", "role": "ADMIN"},
        {"organization": "acme", "actor": "x", "role": ["admin"]},
    ],
)
def test_a_whoami_that_is_not_the_apis_stops_the_console_with_what_to_check(
    whoami: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever answers at --url decides no role: an answer without a clear organization,
    actor and role stops `grandbo console --aws` with a sentence, not a KeyError."""
    import http.server
    import threading

    from grandbo.commands.console import iam_backend
    from grandbo.errors import GrandboError

    body = json.dumps(whoami).encode()

    class Answer(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/prod"
        with pytest.raises(GrandboError, match="did not answer as Grandbo's admin API"):
            iam_backend(url, None, "eu-west-1")
    finally:
        server.shutdown()


def test_a_profile_that_does_not_exist_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from grandbo.commands.console import iam_backend
    from grandbo.errors import GrandboError

    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    with pytest.raises(GrandboError, match=r"--aws: .*no-such-profile"):
        iam_backend("https://abc.execute-api.eu-west-1.amazonaws.com/prod", "no-such-profile", None)
