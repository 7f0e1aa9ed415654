"""`create_study --kind proxy|relevance|quotability --collection NAME --name NAME [--seed S]
[--judgments-per-item N] [--context L/R] [--guidelines-file F] [--annotators a,b]
[--claim-minutes 30] [--candidate-order item|annotator] [--keys JSON] [--auto-advance] [--json]` plus
the kind's own options:

- proxy: `--negatives-from RUN_ID --items N [--candidates 3] [--single-sentence] [--book ID]`
- relevance: `--runs 1,2 [--depth 10] [--use-pools]` (pooled, deduplicated pairs)
- quotability: `--runs RUN_ID [--selection top_non_gold|top_k] [--depth 1]`, or with
  `--multi-select` (the pilot) `[--candidates-from document|pool]`
- label kinds: `[--queries q1,q2] [--n-queries N]` and the label schema, either `--schema FILE.json`
  or `--scale binary|graded-0-2|graded-0-3|0-10 [--question TEXT] [--spans query|passage
  [--spans-required]] [--rubric FILE.json] [--rationale none|optional|required] [--multi-select]`

-> `study_id`, `items`, `skipped` (how many queries could not be made into items) and
`skipped_queries` (which, and why). Defaults: 3 judgments per item (5 for quotability), context
4/4 (4/0 for quotability: the annotator reads what comes before the quotation)."""

import argparse
from pathlib import Path

from django.contrib.auth import get_user_model

from annotation.label_schema import RATIONALE_MODES, SCALES, SPAN_TARGETS
from annotation.models import Study
from annotation.services import create_proxy_study, create_quotability_study, create_relevance_study, validate_schema
from annotation.services.label_studies import MULTI_SELECT_SOURCES, QUOTABILITY_SELECTIONS
from annotation.services.presentation import create_with_presentation
from jobs.progress import terminal_progress
from retrieval.errors import InputError
from retrieval.input_rules import load_json, read_text
from retrieval.management.arguments import collection_named
from retrieval.management.base import JsonCommand
from retrieval.models import Run
from retrieval.selectors import get_run
from retrieval.services.runs import parse_context
from retrieval.wording import counted

DEFAULT_CONTEXT = {Study.Kind.PROXY: "4/4", Study.Kind.RELEVANCE: "4/4", Study.Kind.QUOTABILITY: "4/0"}
DEFAULT_JUDGMENTS = {Study.Kind.PROXY: 3, Study.Kind.RELEVANCE: 3, Study.Kind.QUOTABILITY: 5}
# Options that describe the schema when no --schema file does.
SCHEMA_OPTIONS = ("scale", "question", "spans", "spans_required", "rubric", "rationale", "multi_select")


class Command(JsonCommand):
    help = "Create a study: proxy (gold among a run's negatives), relevance or quotability labels."

    def add_command_arguments(self, parser):
        parser.add_argument("--kind", required=True, choices=[kind.value for kind in Study.Kind], help="Study kind.")
        parser.add_argument("--collection", required=True, help="Collection name.")
        parser.add_argument("--name", required=True, help="Unique study name.")
        parser.add_argument("--seed", type=int, default=0, help="Seeds the query sample, item order and shuffles.")
        parser.add_argument("--judgments-per-item", type=int, help="Default 3 (quotability: 5).")
        parser.add_argument("--context", help="Context sentences shown left/right, e.g. 4/4 (quotability: 4/0).")
        parser.add_argument("--guidelines-file", type=Path, help="Text file with the annotation guidelines.")
        parser.add_argument("--annotators", default="", help="Comma-separated user names; empty: every annotator.")
        parser.add_argument("--claim-minutes", type=int, default=30, help="An unfinished claim expires after this.")
        parser.add_argument(
            "--more-context",
            action=argparse.BooleanOptionalAction,
            help="Let annotators read the book around a candidate (default: off for proxy studies, where it can "
            "give the answer away; on for the others).",
        )
        page = parser.add_argument_group("the annotation page (annotation/presentation.py)")
        page.add_argument(
            "--candidate-order",
            choices=Study.CandidateOrder.values,
            default=Study.CandidateOrder.ITEM,
            help="item: every annotator sees the item's order; annotator: an order of their own (seeded, recorded).",
        )
        page.add_argument("--keys", help='The page\'s keys that differ from the defaults, as JSON, e.g. {"skip": "x"}.')
        page.add_argument("--auto-advance", action="store_true", help="Choosing the last answer submits it.")
        proxy = parser.add_argument_group("proxy studies")
        proxy.add_argument("--negatives-from", type=int, help="Run whose top hits are the negatives.")
        proxy.add_argument("--items", type=int, help="Number of items (queries) to draw.")
        proxy.add_argument("--candidates", type=int, default=3, help="Candidates per item, the gold included (2-20).")
        proxy.add_argument("--single-sentence", action="store_true", help="Only queries whose quote is one sentence.")
        proxy.add_argument("--book", help="Only queries about this book (document external id or id).")
        labels = parser.add_argument_group("relevance and quotability studies")
        labels.add_argument("--runs", default="", help="Comma-separated run ids whose top hits are judged.")
        labels.add_argument("--depth", type=int, help="Top hits taken per run and query (relevance 10, top_k 1).")
        labels.add_argument("--use-pools", action="store_true", help="Relevance: add each query's whole pool.")
        labels.add_argument(
            "--selection",
            choices=QUOTABILITY_SELECTIONS,
            default="top_non_gold",
            help="Quotability: the run's top paragraph where it is not the gold, or its top k.",
        )
        labels.add_argument(
            "--candidates-from",
            choices=MULTI_SELECT_SOURCES,
            default="document",
            help="Quotability pilot: the source document's paragraphs, or the query's pool.",
        )
        labels.add_argument("--queries", default="", help="Comma-separated query external ids; empty: all.")
        labels.add_argument("--n-queries", type=int, help="How many queries (seeded sample) become items.")
        labels.add_argument("--schema", type=Path, help="Label schema as a JSON file (instead of the options below).")
        labels.add_argument("--scale", choices=list(SCALES), help="Label scale (default binary).")
        labels.add_argument("--question", help="The question shown to annotators.")
        labels.add_argument("--spans", choices=SPAN_TARGETS, help="Ask for spans marked on the query or the passage.")
        labels.add_argument("--spans-required", action="store_true", help="At least one span per judgment.")
        labels.add_argument("--rubric", type=Path, help="JSON file: a list of rubric fields {name, values, labels}.")
        labels.add_argument("--rationale", choices=RATIONALE_MODES, help="Ask for a written rationale.")
        labels.add_argument("--multi-select", action="store_true", help="Quotability pilot: select all quotable ones.")

    def run(self, **options):
        kind = options["kind"]
        collection = collection_named(options["collection"], field="--collection")
        context_left, context_right = parse_context(options["context"] or DEFAULT_CONTEXT[kind], field="--context")
        common = {
            "name": options["name"],
            "collection": collection,
            "seed": options["seed"],
            "judgments_per_item": options["judgments_per_item"] or DEFAULT_JUDGMENTS[kind],
            "context_left": context_left,
            "context_right": context_right,
            "guidelines": _guidelines(options["guidelines_file"]),
            "annotators": _annotators(options["annotators"]),
            "claim_minutes": options["claim_minutes"],
            "progress": terminal_progress("create_study"),
        }
        if options["more_context"] is not None:
            common["more_context"] = options["more_context"]
        presentation = {
            "candidate_order": options["candidate_order"],
            "keyboard": _keys(options["keys"]),
            "auto_advance": options["auto_advance"],
        }
        if kind == Study.Kind.PROXY:
            return _created(create_proxy_study, presentation, **common, **_proxy_options(collection, options))
        labels = {
            "queries": _names(options["queries"]) or None,
            "n_queries": options["n_queries"],
            "label_schema": _label_schema(kind, options),
        }
        runs = _runs(options["runs"])
        if kind == Study.Kind.RELEVANCE:
            return _created(
                create_relevance_study,
                presentation,
                **common,
                **labels,
                runs=runs,
                depth=options["depth"] or 10,
                use_pools=options["use_pools"],
            )
        if len(runs) > 1:
            raise InputError("a quotability study judges the paragraphs of one run", field="--runs")
        return _created(
            create_quotability_study,
            presentation,
            **common,
            **labels,
            run=runs[0] if runs else None,
            selection=options["selection"],
            depth=options["depth"] or 1,
            candidates_from=options["candidates_from"],
        )

    def format_text(self, summary):
        lines = [
            f"study {summary['study_id']}: {counted(summary['items'], 'item')},"
            f" {counted(summary['skipped'], 'query')} skipped"
        ]
        lines += [f"  skipped {s['query']}: {s['reason']}" for s in summary["skipped_queries"]]
        return "\n".join(lines)


def _created(create, presentation: dict, **settings) -> dict:
    """The study made by `create` with the page's settings (create_with_presentation: a key that
    clashes, named `keyboard.<name>`, leaves no study), as the command's summary."""
    try:
        return create_with_presentation(create, presentation=presentation, **settings).summary()
    except InputError as exc:
        if exc.field and exc.field.startswith("keyboard"):
            raise InputError(exc.message, field=exc.field.replace("keyboard", "--keys", 1)) from exc
        raise


def _keys(text: str | None):
    if text is None:
        return None
    try:
        return load_json(text)
    except InputError as exc:
        raise InputError(exc.message, field="--keys") from exc


def _proxy_options(collection, options) -> dict:
    if options["negatives_from"] is None:
        raise InputError("a proxy study needs the run whose hits are the negatives", field="--negatives-from")
    if options["items"] is None:
        raise InputError("a proxy study needs the number of items", field="--items")
    return {
        "negatives_run": get_run(options["negatives_from"], field="--negatives-from"),
        "items": options["items"],
        "candidates": options["candidates"],
        "single_sentence": options["single_sentence"],
        "book": _book(collection, options["book"]),
    }


def _label_schema(kind: str, options) -> dict:
    """The schema from --schema FILE, else from the schema options, validated here so that an
    error in the file names the file."""
    given = {key: options[key] for key in SCHEMA_OPTIONS if options[key] not in (None, False)}
    path = options["schema"]
    if path is None:
        if "rubric" in given:
            given["rubric"] = _read_json(given["rubric"])
        return validate_schema(given, kind=kind)
    if given:
        option = "--" + next(iter(given)).replace("_", "-")
        raise InputError(f"give the schema in the file or as options, not both ({option})", field="--schema")
    schema = _read_json(path)
    try:
        return validate_schema(schema, kind=kind)
    except InputError as exc:
        raise InputError(exc.message, file=str(path), field=exc.field) from exc


def _read_json(path: Path):
    return load_json(read_text(path), file=str(path))


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _runs(text: str) -> list[Run]:
    return [get_run(name, field="--runs") for name in _names(text)]


def _book(collection, book):
    if book is None:
        return None
    found = collection.documents.filter(external_id=book).first()
    if found is None and book.isdigit():
        found = collection.documents.filter(pk=int(book)).first()
    if found is None:
        raise InputError(f"no book '{book}' in collection '{collection.name}'", field="--book")
    return found


def _guidelines(path):
    if path is None:
        return ""
    return read_text(path)


def _annotators(names):
    wanted = _names(names)
    users = list(get_user_model().objects.filter(username__in=wanted))
    missing = sorted(set(wanted) - {user.username for user in users})
    if missing:
        raise InputError(f"no user named {', '.join(missing)}", field="--annotators")
    return users
