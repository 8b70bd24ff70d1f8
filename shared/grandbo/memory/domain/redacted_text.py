"""What a redaction keeps of a removed text: its digest, and only that, so the same text
arriving again (a redelivery of its incident, an import of an export made before the
redaction, under new keys) is recognized and refused without the text being kept.

The digest is of the text itself (title and summary, as stored), not of the incident's
id or the delivery's key: those are guessable (an incident platform numbers them), so a
digest of them would let whoever holds a copy of the database find which incident's
finding was redacted, which the learned graph's re-keying of the incident node exists
to prevent (migration 0030). Whoever can produce the text's digest already holds the text.
"""

from __future__ import annotations

import hashlib


def text_digest(title: str, summary: str) -> str:
    """The SHA-256 (hex) of an entry's title and summary, as the write path stores them."""
    return hashlib.sha256(f"{title}\n{summary}".encode()).hexdigest()
