"""Secrets carried in links: made with `secrets`, stored only as their SHA-256 digest, so a
leaked database does not hand out working links."""

import hashlib
import secrets


def new_token() -> str:
    return secrets.token_urlsafe(32)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
