"""Secrets the platform must use but never show again (judges' API keys, webhooks' signing
secrets) are stored sealed: Fernet (AES-128-CBC with HMAC-SHA256, from `cryptography`) under
the keys in MARGINALIA_SECRETS_KEY. Sealed values sit in `SealedField` columns
(outbound.fields); only the code that uses a secret unseals it, right before using it, and
nothing returns it to a person after it was first given.

MARGINALIA_SECRETS_KEY is a comma-separated list: the first key seals, every key unseals, so a
key is rotated by putting a new one first, running `manage.py reseal_secrets`, then dropping
the old one. The entry `DJANGO_SECRET_KEY` (the default) stands for a key derived from Django's
SECRET_KEY with HKDF-SHA256: changing SECRET_KEY then makes sealed values unreadable unless the
old derivation is kept in the list, so deployments that rotate SECRET_KEY set their own key.
"""

from __future__ import annotations

import base64
import functools

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

DERIVED_FROM_DJANGO = "DJANGO_SECRET_KEY"
HINT_MIN_LENGTH = 16


class SealBroken(Exception):
    """A sealed value that none of the configured keys opens."""


def derived_key(secret_key: str) -> bytes:
    """The Fernet key derived from Django's SECRET_KEY (HKDF-SHA256, its own `info`, so it is
    no key Django itself uses)."""
    raw = HKDF(algorithm=SHA256(), length=32, salt=None, info=b"marginalia sealed secrets").derive(secret_key.encode())
    return base64.urlsafe_b64encode(raw)


@functools.lru_cache(maxsize=8)
def _fernet(entries: tuple[str, ...], secret_key: str) -> MultiFernet:
    keys = []
    for entry in entries:
        key = derived_key(secret_key) if entry == DERIVED_FROM_DJANGO else entry.encode()
        try:
            keys.append(Fernet(key))
        except ValueError:
            raise ImproperlyConfigured(
                "MARGINALIA_SECRETS_KEY: each key must be 32 url-safe base64-encoded bytes"
                " (Fernet.generate_key()) or DJANGO_SECRET_KEY"
            ) from None
    if not keys:
        raise ImproperlyConfigured("MARGINALIA_SECRETS_KEY names no key")
    return MultiFernet(keys)


def _keys() -> MultiFernet:
    return _fernet(tuple(settings.MARGINALIA_SECRETS_KEY), settings.SECRET_KEY)


def seal(value: str) -> str:
    """`value` sealed under the first key (a different token each time)."""
    return _keys().encrypt(value.encode()).decode("ascii")


def unseal(token: str) -> str:
    """The value a token seals, or SealBroken when no configured key opens it."""
    try:
        return _keys().decrypt(token.encode("ascii")).decode()
    except (InvalidToken, UnicodeError):
        raise SealBroken(
            "a sealed secret cannot be opened with MARGINALIA_SECRETS_KEY (was a key, or DJANGO_SECRET_KEY,"
            " changed without keeping the old one in the list?)"
        ) from None


def reseal(token: str) -> str:
    """The same value sealed under the first key (for a rotation), or SealBroken."""
    try:
        return _keys().rotate(token.encode("ascii")).decode("ascii")
    except (InvalidToken, UnicodeError):
        raise SealBroken("a sealed secret cannot be opened with MARGINALIA_SECRETS_KEY") from None


def hint(value: str) -> str:
    """What may be shown of a secret so staff can tell two apart: its last 4 characters, and
    only when it is long enough that they give little away."""
    return f"…{value[-4:]}" if len(value) >= HINT_MIN_LENGTH else ""
