"""Secrets Manager reads, through Powertools' provider on a bounded client.

The database's credentials and the keyring are read on a cold start and again after their
cache age; the client's bounds (grandbo.aws_clients) keep a read that stalls from
outliving the function.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from grandbo.aws_clients import client
from grandbo.errors import StoreUnavailableError


@cache
def _secrets() -> Any:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    return SecretsProvider(boto3_client=client("secretsmanager"))


def secret_value(arn: str, *, max_age_s: int = 300) -> str:
    """A Secrets Manager secret's string, cached `max_age_s` by Powertools' provider.

    StoreUnavailableError (503 with Retry-After on the APIs) when Secrets Manager does not
    answer within the client's bounds: without its credentials no database is reachable.
    """
    try:
        return str(_secrets().get(arn, max_age=max_age_s))
    except Exception as exc:
        raise StoreUnavailableError(
            f"the secret {arn.rsplit(':', 1)[-1]} could not be read ({type(exc).__name__})"
        ) from exc
