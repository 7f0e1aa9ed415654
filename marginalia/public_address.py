"""The platform's public address: the one base of every link it hands out (invitation e-mails,
crowd links, the links commands print).

MARGINALIA_BASE_URL, when set, is that address everywhere (a proxy's public name, HTTPS). Left
empty, a web request's links use the address the request came to, and everything outside a
request (commands, workers) uses the address `run_platform` was started on: it announces it in
the data folder when it starts, so a command run in another terminal prints links that work on
the port the platform really listens on. Without either, http://localhost:8000 (run_platform's
default).
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

FALLBACK = "http://localhost:8000"
ANNOUNCEMENT_FILE = "public-address"


def public_address(request=None) -> str:
    """The base URL (no trailing slash) that links start with."""
    if settings.MARGINALIA_BASE_URL:
        return settings.MARGINALIA_BASE_URL.rstrip("/")
    if request is not None:
        return request.build_absolute_uri("/").rstrip("/")
    return announced_address() or FALLBACK


def _announcement() -> Path:
    return Path(settings.MARGINALIA_DATA_DIR) / ANNOUNCEMENT_FILE


def announce(address: str) -> None:
    """Record the address the platform now runs on (run_platform, at start)."""
    path = _announcement()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(address.rstrip("/") + "\n", encoding="utf-8")


def withdraw() -> None:
    """Forget it again (run_platform, when it stops)."""
    _announcement().unlink(missing_ok=True)


def announced_address() -> str | None:
    try:
        address = _announcement().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return address if address.startswith(("http://", "https://")) else None
