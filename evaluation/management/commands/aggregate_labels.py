"""`aggregate_labels STUDY_ID --method majority|dawid-skene|mace|glad [--seed S] [--soft] [--json]`:
one label per item by majority vote or by a model of annotator competence, for every study kind
(evaluation.label_aggregation) -> keys `method`, `labels` (item id -> candidate position chosen /
scale value / selected positions), `competence` (annotator -> [0, 1]), `changed_from_majority`,
plus `changed_items`, `posteriors`, `confusion` (Dawid-Skene), `annotator_details`,
`item_details`, `seed`, `values`, `items`, `judgments`, `annotators`.

With --soft the command prints the soft labels instead: one JSON line per item with its whole
posterior (soft_label_rows), streamed to stdout like the other exports."""

from django.core.management.base import CommandError

from annotation.services import get_study
from evaluation.aggregates import LABEL_METHODS
from evaluation.bulk import json_lines
from evaluation.label_aggregation import soft_label_rows, study_aggregation
from retrieval.errors import InputError
from retrieval.management.base import JsonCommand, write_lines


class Command(JsonCommand):
    help = "Aggregate a study's judgments into one label per item, by majority or by annotator competence."

    def add_command_arguments(self, parser):
        parser.add_argument("study_id", type=int, metavar="STUDY_ID")
        parser.add_argument("--method", choices=LABEL_METHODS, default="majority")
        parser.add_argument("--seed", type=int, default=None, help="MACE's random start (default: the study's seed).")
        parser.add_argument(
            "--soft", action="store_true", help="Print one JSON line per item with its posterior instead."
        )

    def handle(self, *args, **options):
        if not options["soft"]:
            return super().handle(*args, **options)
        try:
            study = get_study(options["study_id"], field="study")
            rows = soft_label_rows(study, options["method"], options["seed"])
            write_lines(self, json_lines(rows))
        except InputError as exc:
            raise CommandError(str(exc)) from exc

    def run(self, *, study_id, method, seed, **options):
        return study_aggregation(get_study(study_id, field="study"), method, seed)

    def format_text(self, summary: dict) -> str:
        lines = [
            f"study {summary['study']} ({summary['kind']}): {summary['method']}, seed {summary['seed']}",
            f"{summary['items']} items, {summary['judgments']} judgments, {summary['annotators']} annotators",
            f"{summary['changed_from_majority']} items labelled differently from the majority vote",
            "competence:",
        ]
        width = max((len(name) for name in summary["competence"]), default=0)
        lines += [f"  {name:<{width}}  {value:.3f}" for name, value in sorted(summary["competence"].items())]
        return "\n".join(lines)
