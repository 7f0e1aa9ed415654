"""What the data manager's tables are asked for, read once from a query string or a form (the
pages) or from a request's parameters (REST): filters, sort, search, the page and the selection.
Every value is checked here, and a bad one is an InputError naming its parameter, so the pages
show one line and the API answers 400 naming the field. The filters turn back into a query
string for the pager's links and the forms' hidden fields."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from urllib.parse import urlencode

from retrieval.errors import InputError
from retrieval.input_rules import parse_id, parse_integer

YES_NO = ("yes", "no")
PER_PAGE_DEFAULT = 50
PER_PAGE_CHOICES = (25, 50, 100, 200)
MAX_SEARCH = 200
# Ids one request may select by hand; more goes through "all matching the filter".
MAX_SELECTED = 1000


def _value(params: Mapping, name: str) -> str:
    """The parameter as text: query strings and forms send text, JSON bodies may send a number."""
    value = params.get(name, "")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InputError("must be text", field=name)
    if "\x00" in value:
        raise InputError("NUL characters are not allowed", field=name)
    return value.strip()


def choice(params: Mapping, name: str, allowed: tuple[str, ...]) -> str:
    """One of `allowed`, or "" when the parameter is absent or empty."""
    value = _value(params, name)
    if value and value not in allowed:
        raise InputError(f"{value!r} is not one of {', '.join(allowed)}", field=name)
    return value


def text(params: Mapping, name: str, limit: int = MAX_SEARCH) -> str:
    value = _value(params, name)
    if len(value) > limit:
        raise InputError(f"at most {limit} characters", field=name)
    return value


def whole_number(params: Mapping, name: str, *, low: int = 0, high: int = 2**31 - 1) -> int | None:
    """A whole number written in ASCII digits within [low, high], or None when absent."""
    value = _value(params, name)
    if not value:
        return None
    number = parse_integer(value, field=name, bounds=(low, high))
    return number


def per_page(params: Mapping) -> int:
    value = whole_number(params, "per_page", low=1, high=max(PER_PAGE_CHOICES))
    if value is None:
        return PER_PAGE_DEFAULT
    if value not in PER_PAGE_CHOICES:
        raise InputError(f"one of {', '.join(map(str, PER_PAGE_CHOICES))}", field="per_page")
    return value


def page_number(params: Mapping) -> int:
    return whole_number(params, "page", low=1) or 1


def selected_ids(values, name: str = "items") -> list[int]:
    """Ids chosen by hand: a list (REST JSON, a form's repeated field) or one comma-separated text
    (a query string), at most MAX_SELECTED."""
    if isinstance(values, str):
        values = [part for part in values.split(",") if part.strip()]
    if not isinstance(values, (list, tuple)):
        raise InputError("a list of ids", field=name)
    if len(values) > MAX_SELECTED:
        raise InputError(f"at most {MAX_SELECTED} ids; act on all rows matching the filter instead", field=name)
    ids = []
    for value in values:
        number = value if isinstance(value, int) and not isinstance(value, bool) else parse_id(str(value).strip())
        if number is None or number < 1:
            raise InputError(f"{value!r} is not an id", field=name)
        ids.append(number)
    return ids


@dataclasses.dataclass(frozen=True)
class TableFilters:
    """Base of each table's filters: the query string they came from, minus page and selection."""

    search: str = ""
    sort: str = ""

    def as_params(self) -> dict[str, str]:
        """The filters that are set, as text parameters."""
        return {
            field.name: str(value)
            for field in dataclasses.fields(self)
            if (value := getattr(self, field.name)) not in ("", None)
        }

    def query_string(self) -> str:
        return urlencode(self.as_params())

    def is_filtered(self) -> bool:
        return any(name != "sort" for name in self.as_params())
