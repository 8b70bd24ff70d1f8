"""A key removed from the local keyring stops authenticating at once (issue 24, item 12).

`grandbo serve` reads its keyring from the file and reads it again whenever the file
changes, so removing a key (or replacing the file, as an editor does) takes effect at
the next request, where the deployed authorizer's cache takes 5 minutes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from grandbo.api.auth import SigningKey, keyring_document, mint_query_token, new_secret
from grandbo.api.client import GrandboHTTPError, MemoryClient
from grandbo.storage.connections import DatabaseUrls

from .conftest import serve_keyring_file, stop_runner

TOPIC = "checkout requests time out because the database connection pool is exhausted"


def _key(tenant: str, name: str) -> SigningKey:
    return SigningKey(key_id=name, tenant_id=tenant, secret=new_secret(), roles=["query"])


def _status(base: str, key: SigningKey) -> int:
    try:
        MemoryClient(base, mint_query_token(key)).query_org_memory(TOPIC)
    except GrandboHTTPError as error:
        return error.status
    return 200


def test_a_removed_key_stops_authenticating_on_a_running_runner(
    database: DatabaseUrls, tenant: str, tmp_path: Path
) -> None:
    keep, revoke = _key(tenant, "kept"), _key(tenant, "revoked")
    keyring = tmp_path / "keyring.json"
    keyring.write_text(keyring_document([keep, revoke]))
    server, base = serve_keyring_file(database, keyring)
    try:
        assert _status(base, revoke) == 200
        # edited in place, the file keeps its inode (and maybe its size and second)
        document = json.loads(keyring.read_text())
        document["keys"] = [k for k in document["keys"] if k["key_id"] != "revoked"]
        keyring.write_text(json.dumps(document))
        assert _status(base, revoke) == 401
        assert _status(base, keep) == 200
        # replaced by a rename, as editors and config tools do
        fresh = _key(tenant, "fresh")
        staged = tmp_path / "keyring.json.new"
        staged.write_text(keyring_document([fresh]))
        os.replace(staged, keyring)
        assert _status(base, fresh) == 200
        assert _status(base, keep) == 401
    finally:
        stop_runner(server)


def test_a_keyring_file_being_rewritten_or_gone_is_refused_never_an_error(
    database: DatabaseUrls, tenant: str, tmp_path: Path
) -> None:
    """Break-it: a deleted, half-written or invalid keyring made every signed admin
    request a 502 and MCP a 500. A file that cannot be parsed leaves the last good keys in
    force; no file at all refuses every caller with 401; a rotation that keeps the size
    and the modification time is still read (the change time differs)."""
    from grandbo.api.auth import sign_admin_request

    query = _key(tenant, "beacon")
    admin = SigningKey(key_id="admin", tenant_id=tenant, secret=new_secret(), roles=["admin"])
    keyring = tmp_path / "keyring.json"
    keyring.write_text(keyring_document([query, admin]))
    server, base = serve_keyring_file(database, keyring)

    def admin_status() -> int:
        import http.client

        signed = sign_admin_request(admin, "GET", "/v1/admin/review", b"")
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
        try:
            conn.request("GET", "/v1/admin/review", headers={**signed, "User-Agent": "t/1"})
            return conn.getresponse().status
        finally:
            conn.close()

    try:
        assert (_status(base, query), admin_status()) == (200, 200)
        keyring.write_text('{"keys": [')  # half written
        assert (_status(base, query), admin_status()) == (200, 200)  # the last good keys
        keyring.unlink()
        assert (_status(base, query), admin_status()) == (401, 401)
        # a rotation of the same size, the modification time put back as it was
        rotated = SigningKey(
            key_id="beacon", tenant_id=tenant, secret=new_secret(), roles=["query"]
        )
        keyring.write_text(keyring_document([query, admin]))
        stamp = keyring.stat()
        assert _status(base, query) == 200
        keyring.write_text(keyring_document([rotated, admin]))
        os.utime(keyring, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        assert keyring.stat().st_size == stamp.st_size
        assert (_status(base, rotated), _status(base, query)) == (200, 401)
    finally:
        stop_runner(server)
