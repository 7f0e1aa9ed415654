"""`create_study --kind proxy --collection NAME --negatives-from RUN_ID --items N --seed S --name NAME
[--candidates 3] [--judgments-per-item 3] [--context 4/4] [--single-sentence] [--book ID]
[--guidelines-file F] [--annotators a,b] [--claim-minutes 30] [--json]`
-> `study_id`, `items`, `skipped` (how many queries could not be made into items) and
`skipped_queries` (which, and why)."""
import re
from pathlib import Path

from django.contrib.auth import get_user_model

from annotation.services import create_proxy_study
from retrieval.errors import InputError
from retrieval.jobs import terminal_progress
from retrieval.management.base import JsonCommand
from retrieval.models import Collection, Run

CONTEXT = re.compile(r"^(\d+)/(\d+)$")


class Command(JsonCommand):
    help = "Create a proxy study: each item shows the gold passage and the top negatives of a run, shuffled."

    def add_command_arguments(self, parser):
        parser.add_argument("--kind", required=True, choices=["proxy"], help="Study kind (proxy).")
        parser.add_argument("--collection", required=True, help="Collection name.")
        parser.add_argument("--negatives-from", required=True, type=int, help="Run whose top hits are the negatives.")
        parser.add_argument("--items", required=True, type=int, help="Number of items (queries) to draw.")
        parser.add_argument("--candidates", type=int, default=3, help="Candidates per item, the gold included (2-20).")
        parser.add_argument("--judgments-per-item", type=int, default=3)
        parser.add_argument("--seed", type=int, default=0, help="Seeds the query sample, item order and shuffles.")
        parser.add_argument("--name", required=True, help="Unique study name.")
        parser.add_argument("--context", default="4/4", help="Context sentences shown left/right, e.g. 4/4.")
        parser.add_argument("--single-sentence", action="store_true", help="Only queries whose quote is one sentence.")
        parser.add_argument("--book", help="Only queries about this book (document external id or id).")
        parser.add_argument("--guidelines-file", type=Path, help="Text file with the annotation guidelines.")
        parser.add_argument("--annotators", default="", help="Comma-separated user names; empty: every annotator.")
        parser.add_argument("--claim-minutes", type=int, default=30, help="An unfinished claim expires after this.")

    def run(self, **options):
        collection = Collection.objects.filter(name=options["collection"]).first()
        if collection is None:
            raise InputError(f"no collection named '{options['collection']}'", field="--collection")
        run = Run.objects.filter(pk=options["negatives_from"]).first()
        if run is None:
            raise InputError(f"no run {options['negatives_from']}", field="--negatives-from")
        context = CONTEXT.match(options["context"])
        if context is None:
            raise InputError(f"expected L/R such as 4/4, got '{options['context']}'", field="--context")
        creation = create_proxy_study(
            name=options["name"], collection=collection, negatives_run=run, items=options["items"],
            candidates=options["candidates"], judgments_per_item=options["judgments_per_item"], seed=options["seed"],
            context_left=int(context.group(1)), context_right=int(context.group(2)),
            single_sentence=options["single_sentence"], book=_book(collection, options["book"]),
            guidelines=_guidelines(options["guidelines_file"]), annotators=_annotators(options["annotators"]),
            claim_minutes=options["claim_minutes"], progress=terminal_progress("create_study"),
        )
        return creation.summary()

    def format_text(self, summary):
        lines = [f"study {summary['study_id']}: {summary['items']} items, {summary['skipped']} queries skipped"]
        lines += [f"  skipped {s['query']}: {s['reason']}" for s in summary["skipped_queries"]]
        return "\n".join(lines)


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
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the guidelines: {exc}", file=str(path)) from exc


def _annotators(names):
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    users = list(get_user_model().objects.filter(username__in=wanted))
    missing = sorted(set(wanted) - {user.username for user in users})
    if missing:
        raise InputError(f"no user named {', '.join(missing)}", field="--annotators")
    return users
