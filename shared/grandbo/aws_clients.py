"""Every AWS client the code builds, each bounded well under its function's timeout.

botocore's defaults are a 60 s connect, a 60 s read and 3 attempts (legacy mode): one
stalled call outlives the query (10 s) and admin (15 s) functions, and the caller gets
API Gateway's 502/504 instead of the 503 with Retry-After the service answers when a
dependency is slow. Each client here states its worst case (`worst_case_s`): every
attempt's connect and read timeouts added up, which `tests/unit/test_aws_clients.py`
holds under the shortest timeout of the functions that build it, and a scan of the code
holds every `boto3.client(...)` to this module and every secret read to
grandbo.runtime.secrets.

botocore's timeouts and retries: https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html
(`total_max_attempts` counts the first call, `max_attempts` only the retries; standard
mode retries throttling and transient errors with jittered backoff) and https://botocore.amazonaws.com/v1/documentation/api/latest/reference/config.html
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from botocore.config import Config


@dataclass(frozen=True)
class ClientBounds:
    """One client's connect and read timeouts and its attempts (the first included)."""

    connect_timeout_s: float
    read_timeout_s: float
    max_attempts: int

    @property
    def worst_case_s(self) -> float:
        """The longest a call can take before it fails: every attempt timing out (standard
        mode's backoff between attempts is at most a second each at these counts)."""
        per_attempt = self.connect_timeout_s + self.read_timeout_s
        return self.max_attempts * per_attempt + (self.max_attempts - 1)

    def config(self) -> Config:
        from botocore.config import Config

        return Config(
            connect_timeout=self.connect_timeout_s,
            read_timeout=self.read_timeout_s,
            # total_max_attempts counts the first call; botocore's max_attempts does not
            # (it is the retries: max_attempts=1 is two calls, as the reranker had)
            retries={"total_max_attempts": self.max_attempts, "mode": "standard"},
        )


# An operator's command (`grandbo smoke`) across the internet: no function's deadline, a
# person waiting; it reads the keyring with these too, not the functions' tight bounds.
OPERATOR = ClientBounds(connect_timeout_s=3, read_timeout_s=10, max_attempts=3)

# The bounds of each client. The tests hold, for every function that builds it (BUILT_BY),
# its worst case plus the database connect under the function's timeout, unless the code
# cuts the call shorter itself (the query's topic embedding at 2 s, its rerank at 1 s).
BOUNDS: dict[str, ClientBounds] = {
    # the jobs of a committed write (admin, 15 s), the incident queue's dead letters
    "sqs": ClientBounds(connect_timeout_s=0.5, read_timeout_s=1.5, max_attempts=2),
    # the database's credentials and the keyring, read on a cold start and every 5 minutes;
    # the authorizer (5 s) reads nothing else
    "secretsmanager": ClientBounds(connect_timeout_s=0.5, read_timeout_s=0.75, max_attempts=2),
    # Titan: one text per call; an embed job of the worker, a calibration's titles (admin)
    "bedrock-runtime": ClientBounds(connect_timeout_s=1, read_timeout_s=3, max_attempts=2),
    # the reranker: one attempt, the query's deadline is shorter than any retry would be
    "bedrock-agent-runtime": ClientBounds(
        connect_timeout_s=0.5, read_timeout_s=1.5, max_attempts=1
    ),
    # `grandbo smoke` on an operator's machine: no function's deadline, a person waiting
    "cloudformation": OPERATOR,
    "events": OPERATOR,
    "sns": OPERATOR,
}

# The functions (infra/functions.py SPECS) whose code builds each client; a test compares
# it with the template's grants (a function allowed to call a service is listed here).
BUILT_BY: dict[str, tuple[str, ...]] = {
    "sqs": ("admin", "incident", "embed", "backfill"),
    "secretsmanager": (
        "query",
        "authorizer",
        "admin",
        "incident",
        "embed",
        "backfill",
        "migrations",
        "index",
    ),
    "bedrock-runtime": ("query", "admin", "embed", "index"),
    "bedrock-agent-runtime": ("query", "admin"),
    # the operator's CLI only (grandbo.smoke); no function builds these
    "cloudformation": (),
    "events": (),
    "sns": (),
}


def client(service: str, *, region: str | None = None, bounds: ClientBounds | None = None) -> Any:
    """A boto3 client of `service` with its bounds (KeyError for a service not listed) or
    `bounds`, in `region` or the environment's."""
    import boto3

    config = (bounds or BOUNDS[service]).config()
    return boto3.client(service, config=config, region_name=region)  # type: ignore[call-overload]
