"""Options several commands share, read one way: `--context L/R` and a collection named by
`--collection` (training's own options are in training_arguments.py)."""

from __future__ import annotations

from retrieval.errors import InputError
from retrieval.models import Collection
from retrieval.services.runs import parse_context


def add_context_argument(parser, default: str = "4/4") -> None:
    """`--context L/R`, read back with `context_option`."""
    parser.add_argument("--context", default=default, help="Sentences of context left/right of the mask, e.g. 4/4.")


def context_option(options: dict) -> dict:
    """The `--context L/R` option as the `context_left` / `context_right` keywords runs and
    trainings take."""
    context_left, context_right = parse_context(options["context"])
    return {"context_left": context_left, "context_right": context_right}


def collection_named(name: str, field: str = "collection") -> Collection:
    """The collection a command names, or an InputError naming the option."""
    collection = Collection.objects.filter(name=name).first()
    if collection is None:
        raise InputError(f"no collection named {name!r}", field=field)
    return collection
