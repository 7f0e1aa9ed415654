"""The site navigation, in one place: every page renders this list (templates/base.html through
the `navigation` tag), so a new page is one line here.

Each entry names a URL; `staff_only` entries are hidden from annotators. The entry whose URL
prefixes the current path is marked as the current page ("/" only on itself)."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse


@dataclass(frozen=True)
class NavLink:
    label: str
    url_name: str
    staff_only: bool = True


NAVIGATION = (
    NavLink("My studies", "home", staff_only=False),
    NavLink("Dashboard", "dashboard"),
    NavLink("Studies", "study_list"),
    NavLink("Compare runs", "evaluation:run-comparison"),
    NavLink("Judges", "judges:judge-list"),
    NavLink("API", "api-root"),
    NavLink("API docs", "api-docs"),
    NavLink("Admin", "admin:index"),
)


def navigation_for(user, path: str) -> list[dict]:
    """The links `user` may follow, each with its URL and whether it is the current page."""
    if user is None or not user.is_authenticated:
        return []
    links = [entry for entry in NAVIGATION if user.is_staff or not entry.staff_only]
    resolved = [(entry, reverse(entry.url_name)) for entry in links]
    current = max((url for _, url in resolved if _is_under(path, url)), key=len, default=None)
    return [{"label": entry.label, "url": url, "current": url == current} for entry, url in resolved]


def _is_under(path: str, url: str) -> bool:
    return path == url if url == "/" else path.startswith(url)
