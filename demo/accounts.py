"""The demo accounts that `seed_demo` creates and `run_platform` prints.

Passwords come from MARGINALIA_DEMO_PASSWORD when it is set (one password for every demo
account), else from fixed demo passwords: these accounts exist to try the platform on a laptop
and must never be seeded on a public server.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class DemoAccount:
    username: str
    password: str
    role: str  # "admin" (staff and superuser) or "annotator"

    @property
    def is_staff(self) -> bool:
        return self.role == "admin"


def demo_accounts() -> list[DemoAccount]:
    shared = os.environ.get("MARGINALIA_DEMO_PASSWORD", "")
    return [
        DemoAccount("admin", shared or "marginalia-admin", "admin"),
        DemoAccount("annotator1", shared or "marginalia-reader-1", "annotator"),
        DemoAccount("annotator2", shared or "marginalia-reader-2", "annotator"),
    ]
