"""Path converters. `<id:name>` is a database id, the only kind of number the routes take.
Django's `<int:>` matches any run of digits, and a number past the 64-bit range that reaches a
query through a foreign key (`CrowdLink.objects.get(study_id=...)`) makes SQLite raise
OverflowError: a 500 where the caller should get a 404 (Django guards only a model's own integer
fields). An id route therefore matches only ids a database can hold; any other number is "not
found" before a view runs."""

LARGEST_ID = 2**63 - 1  # SQLite's INTEGER and Postgres' bigint


class DatabaseIdConverter:
    regex = "[0-9]+"

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > LARGEST_ID:
            raise ValueError(f"{value} is larger than any database id")  # Django: no match, 404
        return number

    def to_url(self, value) -> str:
        return str(value)


def database_id(text: str) -> int:
    """A command's id argument (argparse's `type`), under the routes' rule: ASCII digits a
    database can hold ('٣', '1_0' and 2**63 are refused: "invalid id value")."""
    if not (text.isascii() and text.isdigit()):
        raise ValueError(text)
    return DatabaseIdConverter().to_python(text)


database_id.__name__ = "id"
