"""Bearer tokens for ``navi-core serve``: from the environment or a file, compared in
constant time.

``NAVI_SERVE_TOKENS`` holds tokens separated by commas or whitespace; a token file
holds one per line (blank lines and ``#`` comments are skipped). A request passes when
its ``Authorization: Bearer <token>`` equals any of them; every configured token is
compared (``hmac.compare_digest`` over SHA-256 digests, so neither the length nor the
position of a mismatch shows in the timing). ``weak_token`` names a token that is easy
to guess; ``throttle.AuthThrottle`` pauses a client that keeps guessing.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

__all__ = ["TOKENS_ENV", "BearerAuth", "tokens_from", "weak_token"]

#: the environment variable holding the accepted tokens
TOKENS_ENV: Final = "NAVI_SERVE_TOKENS"
#: a token shorter than this is weak
MIN_TOKEN_CHARS: Final = 16
#: a token with fewer different characters than this is weak
MIN_DISTINCT_CHARS: Final = 8


def weak_token(token: str) -> bool:
    """True when ``token`` is short or repetitive enough to be guessed."""
    token = token.strip()
    return len(token) < MIN_TOKEN_CHARS or len(set(token)) < MIN_DISTINCT_CHARS


def tokens_from(
    file: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """The tokens of ``$NAVI_SERVE_TOKENS`` and of ``file`` (one per line).

    Raises:
        OSError: the file cannot be read.
    """
    env = os.environ if environ is None else environ
    tokens = env.get(TOKENS_ENV, "").replace(",", " ").split()
    if file is not None:
        for line in Path(file).read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                tokens.append(line)
    return tokens


class BearerAuth:
    """Checks ``Authorization`` headers against a fixed set of tokens."""

    __slots__ = ("_digests",)

    def __init__(self, tokens: Iterable[str]) -> None:
        self._digests = tuple(
            hashlib.sha256(t.encode()).digest() for t in tokens if t.strip()
        )
        if not self._digests:
            raise ValueError("BearerAuth needs at least one non-empty token")

    def allows(self, header: str | None) -> bool:
        """True when ``header`` is ``Bearer <token>`` with an accepted token."""
        if header is None:
            return False
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return False
        digest = hashlib.sha256(token.strip().encode()).digest()
        ok = False
        for known in self._digests:
            ok |= hmac.compare_digest(digest, known)
        return ok

    def __repr__(self) -> str:
        return f"<BearerAuth tokens={len(self._digests)}>"
