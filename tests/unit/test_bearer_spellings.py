"""One token, one spelling that counts at the edge (issue 51, point 4): the authorizer takes
`Bearer <token>` with the scheme in any case (RFC 9110) and spaces before the token, which
the WAF's rate key lowercases and compresses into the canonical spelling's counter, and
refuses a spelling the WAF would count apart (anything after the token)."""

from __future__ import annotations

import pytest

from grandbo.api.auth import (
    AuthenticationError,
    Keyring,
    SigningKey,
    mint_query_token,
    new_secret,
    verify_query_token,
)

KEY = SigningKey(key_id="acme-beacon", tenant_id="acme", secret=new_secret(), roles=["query"])
KEYRING = Keyring([KEY])


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
@pytest.mark.parametrize("gap", [" ", "  ", "   "])
def test_every_spelling_it_takes_is_one_counter_at_the_edge(scheme: str, gap: str) -> None:
    token = mint_query_token(KEY)
    header = f"{scheme}{gap}{token}"
    assert verify_query_token(KEYRING, header).key_id == KEY.key_id
    canonical = f"Bearer {token}"
    lowered = header.lower()
    while "  " in lowered:  # COMPRESS_WHITE_SPACE: runs of spaces become one
        lowered = lowered.replace("  ", " ")
    assert lowered == canonical.lower()


@pytest.mark.parametrize("suffix", [" ", "\\t", " x", "\\n"])
def test_a_spelling_the_edge_would_count_apart_is_refused(suffix: str) -> None:
    header = f"Bearer {mint_query_token(KEY)}{suffix.encode().decode('unicode_escape')}"
    with pytest.raises(AuthenticationError):
        verify_query_token(KEYRING, header)


@pytest.mark.parametrize("header", ["Basic abc", "Bearer", "Bearer ", "Token gbq1.a.1.b"])
def test_another_scheme_or_no_token_is_refused(header: str) -> None:
    with pytest.raises(AuthenticationError):
        verify_query_token(KEYRING, header)
