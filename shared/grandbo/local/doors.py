"""The guard of local mode's own doors, `/local/events` and `/local/backfill`.

In AWS they are EventBridge and Lambda's invoke, which IAM guards. Locally they are HTTP
routes on the developer's machine, and a web page open in the developer's browser can
reach one: a cross-origin "simple request" (a `text/plain` POST) needs no preflight, and a
DNS-rebinding page can even name its own host. So a door answers only a request that is
declared JSON (which a browser cannot send cross-origin without a preflight nobody
answers), is addressed to the loopback address the runner serves (Host, and Origin when a
browser sends one), and carries the local door key (`Authorization: Bearer <key>`, from
`<data dir>/local-doors.key`, printed with `grandbo serve`'s curl examples).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

DOOR_KEY_FILE = "local-doors.key"


def door_key(data_dir: Path) -> str:
    """The local doors' key, made (owner-only) on first use."""
    path = data_dir / DOOR_KEY_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(32))
    return path.read_text().strip()


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class DoorRefusal:
    status: int
    error: str
    message: str

    def document(self) -> dict[str, str]:
        return {"error": self.error, "message": self.message, "field": "headers"}


@dataclass(frozen=True)
class DoorGuard:
    key: str
    hosts: frozenset[str]  # the Host values a request to the doors may carry

    @classmethod
    def serving(cls, key: str, host: str, port: int) -> DoorGuard:
        """The guard of a runner bound to `host:port`: its own address, and the loopback
        names of it (a runner on a non-loopback address still answers its doors only to
        requests addressed to loopback: they are for this machine's tools)."""
        hosts = {_authority(name, port) for name in ("127.0.0.1", "localhost", "::1")}
        if is_loopback(host):
            hosts.add(_authority(host, port))
        return cls(key, frozenset(hosts))

    def refusal(
        self,
        peer: str,
        hosts: Sequence[str],
        origins: Sequence[str],
        content_types: Sequence[str],
        authorizations: Sequence[str],
    ) -> DoorRefusal | None:
        """Why a request may not come through a door, or None. `peer` is the address the
        connection came from (on a runner bound beyond loopback, a Host header alone would
        let another machine through); each other argument is every value the request
        carries for that header."""
        if not is_loopback(peer):
            return DoorRefusal(
                403,
                "forbidden",
                "the local doors answer only this machine (the connection "
                "came from another address)",
            )
        if len(hosts) != 1 or hosts[0].strip().lower() not in self.hosts:
            return DoorRefusal(
                403,
                "forbidden",
                "the local doors answer only requests to the loopback "
                "address this runner serves (Host)",
            )
        if any(
            origin.strip().lower() not in {f"http://{h}" for h in self.hosts} for origin in origins
        ):
            return DoorRefusal(
                403,
                "forbidden",
                "the local doors answer no request from a web page of another origin (Origin)",
            )
        media = [value.split(";")[0].strip().lower() for value in content_types]
        if media != ["application/json"]:
            return DoorRefusal(
                415,
                "unsupported_media_type",
                "a local door takes a body declared Content-Type: application/json",
            )
        expected = f"Bearer {self.key}"
        if len(authorizations) != 1 or not hmac.compare_digest(
            authorizations[0].strip().encode(), expected.encode()
        ):
            return DoorRefusal(
                401,
                "unauthorized",
                "a local door needs Authorization: Bearer <the key in "
                "the data directory's local-doors.key> (grandbo serve prints it)",
            )
        return None
