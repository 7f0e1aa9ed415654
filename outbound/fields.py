"""A model field for sealed secrets (outbound.sealing): it holds the Fernet token as text and
never the secret. It does not unseal on read, so a serializer, the admin or an export that
shows the row shows a token, never the value; code that needs the value calls `unseal`."""

from django.db import models


class SealedField(models.TextField):
    """A Fernet token from `outbound.sealing.seal`; `reseal_secrets` finds every such column."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("editable", False)
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        kwargs.pop("editable", None)
        return name, path, args, kwargs
