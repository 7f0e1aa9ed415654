"""`create_study --kind proxy|relevance|quotability|preference --collection NAME --name NAME [--seed S]
[--judgments-per-item N] [--context L/R] [--guidelines-file F] [--annotators a,b]
[--claim-minutes 30] [--candidate-order item|annotator] [--keys JSON] [--auto-advance] [--json]` plus
the kind's own options:

- proxy: `--negatives-from RUN_ID --items N [--candidates 3] [--single-sentence] [--book ID]`
- relevance: `--runs 1,2 [--depth 10] [--use-pools]` (pooled, deduplicated pairs), judged as
  `--pool depth|rrf|rbp|mtf` chooses (default depth: every pair) under `[--budget N]` judged
  pairs in all and `[--budget-per-query N]`, with `[--rrf-k 60]`, `[--rbp-p 0.8]` and
  move-to-front's `[--lookahead 1]`
- quotability: `--runs RUN_ID [--selection top_non_gold|top_k] [--depth 1]`, or with
  `--multi-select` (the pilot) `[--candidates-from document|pool]`
- label kinds: `[--queries q1,q2] [--n-queries N]` and the label schema, either `--schema FILE.json`
  or `--scale binary|graded-0-2|graded-0-3|0-10 [--question TEXT] [--spans query|passage
  [--spans-required]] [--rubric FILE.json] [--rationale none|optional|required] [--multi-select]`
- preference: `--runs 1,2 [--depth 10] [--use-pools] [--queries ...] [--n-queries N]
  --design all-pairs|random|adaptive [--budget N] [--rule top-k|informative] [--top-k 5]
  [--pairings P] [--all-pairs-below F] [--batch 2] [--alpha 0.01] [--shape pairwise|listwise]
  [--list-size 4] [--no-ties] [--no-both-bad] [--question TEXT]` or `--schema FILE.json` (the
  preference schema, annotation/preference_schema.py)

-> `study_id`, `items`, `skipped` (how many queries could not be made into items) and
`skipped_queries` (which, and why). Defaults: 3 judgments per item (5 for quotability; 1 for an
adaptive preference design), context 4/4 (4/0 for quotability: the annotator reads what comes
before the quotation)."""

import argparse
from pathlib import Path

from django.contrib.auth import get_user_model

from annotation.label_schema import RATIONALE_MODES, SCALES, SPAN_TARGETS
from annotation.models import Pool, Study
from annotation.preference_schema import SHAPES, validate_preference_schema
from annotation.services import (
    create_preference_study,
    create_proxy_study,
    create_quotability_study,
    create_relevance_study,
    validate_schema,
)
from annotation.services.label_studies import MULTI_SELECT_SOURCES, QUOTABILITY_SELECTIONS
from annotation.services.preference_designs import DEFAULT_ALPHA
from annotation.services.preference_studies import DEFAULT_BATCH, DESIGNS, RULES
from annotation.services.presentation import create_with_presentation
from jobs.progress import terminal_progress
from retrieval.errors import InputError
from retrieval.input_rules import load_json, parse_id, read_text
from retrieval.management.arguments import collection_named
from retrieval.management.base import JsonCommand
from retrieval.models import Run
from retrieval.selectors import get_run
from retrieval.services.runs import parse_context
from retrieval.wording import counted

DEFAULT_CONTEXT = {
    Study.Kind.PROXY: "4/4",
    Study.Kind.RELEVANCE: "4/4",
    Study.Kind.QUOTABILITY: "4/0",
    Study.Kind.PREFERENCE: "4/4",
}
# Preference studies choose theirs by design (create_preference_study).
DEFAULT_JUDGMENTS = {
    Study.Kind.PROXY: 3,
    Study.Kind.RELEVANCE: 3,
    Study.Kind.QUOTABILITY: 5,
    Study.Kind.PREFERENCE: None,
}
# Options that describe the schema when no --schema file does.
SCHEMA_OPTIONS = ("scale", "question", "spans", "spans_required", "rubric", "rationale", "multi_select")
# Options of a relevance study's pool (None: the service's default).
POOL_OPTIONS = ("pool", "budget", "budget_per_query", "rrf_k", "rbp_p", "lookahead")


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
        pools = parser.add_argument_group("relevance pools (docs/DESIGN.md, Pools)")
        pools.add_argument(
            "--pool",
            choices=[strategy.value for strategy in Pool.Strategy],
            help="Which pairs are judged: depth (every run's top k, the default), rrf or rbp (fusion order until "
            "the budget), mtf (move-to-front: runs that yield relevant pairs get more judged).",
        )
        pools.add_argument(
            "--budget",
            type=int,
            help="Relevance: most (query, passage) pairs judged in all. Preference: pairs (lists) per query of "
            "the random and adaptive designs.",
        )
        pools.add_argument("--budget-per-query", type=int, help="Most pairs judged per query.")
        pools.add_argument("--rrf-k", type=int, help="rrf: the k of 1 / (k + rank) (default 60).")
        pools.add_argument("--rbp-p", type=float, help="rbp: the persistence p of (1 - p) p^(rank - 1) (default 0.8).")
        pools.add_argument("--lookahead", type=int, help="mtf: undecided pairs kept open for annotators (default 1).")
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
        preference = parser.add_argument_group("preference studies (also --runs, --depth, --use-pools, --queries)")
        preference.add_argument("--design", choices=DESIGNS, help="All pairs, a random subset, or adaptive.")
        preference.add_argument("--rule", choices=RULES, default=RULES[0], help="Adaptive: which pairs come next.")
        preference.add_argument("--top-k", type=int, default=5, help="Top-k rule: how many best passages to find.")
        preference.add_argument("--pairings", type=int, help="Top-k rule: first-stage pairings (default max(7, 2k-1)).")
        preference.add_argument(
            "--all-pairs-below", type=int, help="Top-k rule: all pairs from this many (pairings+2)."
        )
        preference.add_argument(
            "--batch", type=int, default=DEFAULT_BATCH, help="Informative rule: open pairs a query."
        )
        preference.add_argument("--alpha", type=float, default=DEFAULT_ALPHA, help="Informative rule: choix's alpha.")
        preference.add_argument("--shape", choices=SHAPES, help="Pairs (default) or lists to put in order.")
        preference.add_argument("--list-size", type=int, help="Candidates per list (3-6, default 4).")
        preference.add_argument("--no-ties", action="store_true", help="Refuse 'tie' answers.")
        preference.add_argument("--no-both-bad", action="store_true", help="Refuse 'both bad' answers.")

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
        # --budget is also a preference design's budget per query (_preference_options).
        shared = ("budget",) if kind == Study.Kind.PREFERENCE else ()
        pool = {name: options[name] for name in POOL_OPTIONS if options[name] is not None and name not in shared}
        if pool and kind != Study.Kind.RELEVANCE:
            option = "--" + next(iter(pool)).replace("_", "-")
            raise InputError("a pool is how a relevance study's pairs are chosen", field=option)
        presentation = {
            "candidate_order": options["candidate_order"],
            "keyboard": _keys(options["keys"]),
            "auto_advance": options["auto_advance"],
        }
        if kind == Study.Kind.PROXY:
            return _created(create_proxy_study, presentation, **common, **_proxy_options(collection, options))
        if kind == Study.Kind.PREFERENCE:
            return _created(create_preference_study, presentation, **common, **_preference_options(options))
        label_schema = _label_schema(kind, options)
        if kind == Study.Kind.RELEVANCE:
            return _created(
                create_relevance_study,
                presentation,
                **common,
                **_pool_sources(options),
                **pool,
                label_schema=label_schema,
            )
        runs = _runs(options["runs"])
        if len(runs) > 1:
            raise InputError("a quotability study judges the paragraphs of one run", field="--runs")
        return _created(
            create_quotability_study,
            presentation,
            **common,
            **_chosen_queries(options),
            label_schema=label_schema,
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


def _preference_options(options) -> dict:
    if options["design"] is None:
        raise InputError("a preference study needs a design: all-pairs, random or adaptive", field="--design")
    return {
        **_pool_sources(options),
        "design": options["design"],
        "budget": options["budget"],
        "rule": options["rule"],
        "top_k": options["top_k"],
        "pairings": options["pairings"],
        "all_pairs_below": options["all_pairs_below"],
        "batch": options["batch"],
        "alpha": options["alpha"],
        "label_schema": _preference_schema(options),
    }


def _pool_sources(options) -> dict:
    """Where a relevance or preference study's pool of candidates comes from: the runs' top
    `--depth` hits (10 by default) and, with --use-pools, the queries' own pools, over the chosen
    queries."""
    return {
        "runs": _runs(options["runs"]),
        "depth": options["depth"] or 10,
        "use_pools": options["use_pools"],
        **_chosen_queries(options),
    }


def _chosen_queries(options) -> dict:
    """--queries (empty: all of them) and --n-queries, as every study but a proxy one takes them."""
    return {"queries": _names(options["queries"]) or None, "n_queries": options["n_queries"]}


def _preference_schema(options) -> dict:
    """The preference schema from --schema FILE, else from the preference options."""
    given = {
        "shape": options["shape"],
        "list_size": options["list_size"],
        "question": options["question"],
        "ties": False if options["no_ties"] else None,
        "bad": False if options["no_both_bad"] else None,
    }
    given = {key: value for key, value in given.items() if value is not None}
    path = options["schema"]
    if path is None:
        return validate_preference_schema(given)
    if given:
        raise InputError("give the schema in the file or as options, not both", field="--schema")
    try:
        return validate_preference_schema(_read_json(path))
    except InputError as exc:
        raise InputError(exc.message, file=str(path), field=exc.field) from exc


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
    if found is None and (book_id := parse_id(book)) is not None:
        found = collection.documents.filter(pk=book_id).first()
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
