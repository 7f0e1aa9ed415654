"""The URL configuration as a list: what the attack sweep and benchmarks/staff_pages.py walk."""

from django.urls import URLPattern, URLResolver, get_resolver


def routes(patterns=None, prefix: str = "", namespace: str = ""):
    """Every (name, path template) of the URL configuration, names with their namespace."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from routes(pattern.url_patterns, prefix + str(pattern.pattern), inner)
        elif isinstance(pattern, URLPattern):
            yield (f"{namespace}{pattern.name}" if pattern.name else None), prefix + str(pattern.pattern)
