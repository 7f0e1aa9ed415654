"""Judges' API keys and who may point a judge at an endpoint.

A judge's key is never configuration: `settings.api_key_secret` names a `JudgeSecret`, a key
staff registered (sealed, write-only), so registering a judge cannot send the worker's own
environment (DATABASE_URL, REDIS_URL, DJANGO_SECRET_KEY...) to a URL of one's choosing. Judges
registered before secrets existed name an environment variable (`api_key_env`): it is read
only when its name is listed in MARGINALIA_JUDGE_KEY_ENVS by whoever runs the platform, and
never for the platform's own variables; otherwise the judge is refused at registration and at
run time with a line saying how to move the key into a judge secret.

Registering an endpoint judge, changing its endpoint and managing judge secrets needs the
permission judges.manage_judge_endpoints (running judges stays a staff action). The command
line (register_judge, judge_secret) is for whoever has a shell on the platform and checks none.
"""

from __future__ import annotations

import os
import re

from django.conf import settings as django_settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction

from outbound.sealing import SealBroken, hint, seal, unseal
from retrieval.errors import InputError

from .models import JudgeSecret

ENDPOINT_PERMISSION = "judges.manage_judge_endpoints"
SECRET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_SECRET_LENGTH = 4096
# Variables that configure the platform itself: never a judge's key, whatever the allow-list says.
PLATFORM_VARIABLES = re.compile(r"^(DJANGO_|DATABASE_|REDIS_|CELERY_|MARGINALIA_|SECRET_KEY$)")


def can_manage_endpoints(user) -> bool:
    return bool(user and user.is_active and user.is_staff and user.has_perm(ENDPOINT_PERMISSION))


def require_endpoint_permission(user) -> None:
    """PermissionDenied unless `user` may register endpoint judges (None: the command line)."""
    if user is not None and not can_manage_endpoints(user):
        raise PermissionDenied(
            f"Registering a judge's endpoint or a judge secret needs the permission {ENDPOINT_PERMISSION}."
        )


# --- the registry -----------------------------------------------------------------------------------


def _checked_value(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InputError("must be the key as non-empty text", field="value")
    if len(value) > MAX_SECRET_LENGTH:
        raise InputError(f"must be at most {MAX_SECRET_LENGTH} characters", field="value")
    if not value.isprintable() or value != value.strip():
        raise InputError("must not contain spaces at its ends, line breaks or control characters", field="value")
    return value


def store_secret(name: str, value: object, user=None) -> JudgeSecret:
    """Register a new judge secret (a name already taken is refused: change that one instead)."""
    require_endpoint_permission(user)
    if not isinstance(name, str) or not SECRET_NAME.match(name):
        raise InputError("must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", field="name")
    value = _checked_value(value)
    try:
        with transaction.atomic():
            return JudgeSecret.objects.create(name=name, sealed_value=seal(value), hint=hint(value), created_by=user)
    except IntegrityError:
        raise InputError(f"a judge secret named {name!r} exists; change its value instead", field="name") from None


def change_secret(secret: JudgeSecret, value: object, user=None) -> JudgeSecret:
    """Give a judge secret a new value (a rotated API key): judges naming it use it from now on."""
    require_endpoint_permission(user)
    value = _checked_value(value)
    secret.sealed_value, secret.hint = seal(value), hint(value)
    secret.save(update_fields=["sealed_value", "hint", "updated_at"])
    return secret


def delete_secret(secret: JudgeSecret, user=None) -> None:
    """Remove a judge secret; judges naming it are refused at run time until it is registered again."""
    require_endpoint_permission(user)
    secret.delete()


def check_key_source(given: dict) -> None:
    """At registration: `api_key_secret` names a registered secret, `api_key_env` an allowed
    variable, and not both."""
    if given.get("api_key_secret") and given.get("api_key_env"):
        raise InputError("give api_key_secret or api_key_env, not both", field="settings.api_key_env")
    if given.get("api_key_secret") and not JudgeSecret.objects.filter(name=given["api_key_secret"]).exists():
        raise InputError(
            f"no judge secret named {given['api_key_secret']!r} (register it at /api/judge-secrets/)",
            field="settings.api_key_secret",
        )
    if given.get("api_key_env"):
        _allowed_variable(str(given["api_key_env"]))


def _allowed_variable(name: str) -> str:
    if name not in django_settings.MARGINALIA_JUDGE_KEY_ENVS or PLATFORM_VARIABLES.match(name):
        raise InputError(
            f"judges may not read environment variable {name}: register the key as a judge secret"
            f" (POST /api/judge-secrets/ or `manage.py judge_secret NAME`) and name it in api_key_secret"
            + ("" if PLATFORM_VARIABLES.match(name) else f", or list {name} in MARGINALIA_JUDGE_KEY_ENVS"),
            field="settings.api_key_env",
        )
    return name


def api_key(settings: dict) -> str:
    """The key an openai judge sends: its judge secret unsealed, its allowed environment
    variable, or a placeholder for endpoints that need none (the client insists on one)."""
    if settings.get("api_key_secret"):
        secret = JudgeSecret.objects.filter(name=settings["api_key_secret"]).first()
        if secret is None:
            raise InputError(
                f"no judge secret named {settings['api_key_secret']!r}: register it again",
                field="settings.api_key_secret",
            )
        try:
            return unseal(secret.sealed_value)
        except SealBroken as exc:
            raise InputError(str(exc), field="settings.api_key_secret") from None
    if settings.get("api_key_env"):
        name = _allowed_variable(str(settings["api_key_env"]))
        if not os.environ.get(name):
            raise InputError(f"environment variable {name} is not set", field="settings.api_key_env")
        return os.environ[name]
    return "no-key"
