"""`preference_scores STUDY_ID [--model bradley-terry|plackett-luce|elo] [--alpha 0.01]
[--intervals 200] [--seed 0] [--qrels-out FILE] [--save-run [NAME]] [--compare RUN,RUN [--p 0.95]
[--depth 1000]] [--json]`: a preference study's scores per query -> keys `queries` (query
external id -> `scores` (passage external id -> log-scale score, summing to 0), `ranking` (best
first), `intervals`, `wins`, `comparisons`, `both_bad`, `judgments`), `model`, `alpha`, `ties`,
`judgments`, `both_bad_answers`, `intervals`, `systems` (answers collections); with --qrels-out
`qrels` (the file written), with --save-run `run_id` (the human ranking stored as a run), with
--compare `compared` (each run's compatibility and Kendall's tau against the human ranking)."""

from pathlib import Path

from annotation.services import get_study
from evaluation import preference_access
from evaluation.preference_scores import DEFAULT_RESAMPLES, preference_qrels, preference_scores, save_human_run
from retrieval.management.base import JsonCommand


class Command(JsonCommand):
    help = "Score a preference study's passages per query (Bradley-Terry, Plackett-Luce or Elo) with intervals."

    def add_command_arguments(self, parser):
        parser.add_argument("study_id", type=int, metavar="STUDY_ID")
        parser.add_argument("--model", help="bradley-terry (pairs' default), plackett-luce (lists' default) or elo.")
        parser.add_argument("--alpha", type=float, default=0.01, help="choix's regularisation.")
        parser.add_argument("--intervals", type=int, default=DEFAULT_RESAMPLES, help="Bootstrap resamples (0: none).")
        parser.add_argument("--seed", type=int, default=0, help="The bootstrap's seed.")
        parser.add_argument("--qrels-out", type=Path, help="Write the preference qrels (qid 0 docid grade) here.")
        parser.add_argument("--save-run", nargs="?", const="", help="Store the human ranking as a run (optional name).")
        parser.add_argument("--compare", default="", help="Comma-separated runs to compare with the human ranking.")
        parser.add_argument("--p", type=float, default=0.95, help="Compatibility's persistence.")
        parser.add_argument("--depth", type=int, default=1000, help="Compatibility's depth.")

    def run(self, *, study_id, **options):
        study = get_study(study_id, field="study")
        report = preference_scores(
            study, model=options["model"], alpha=options["alpha"], resamples=options["intervals"], seed=options["seed"]
        )
        if options["qrels_out"] is not None:
            lines = [f"{query} 0 {passage} {grade}\n" for query, passage, grade in preference_qrels(report)]
            options["qrels_out"].write_text("".join(lines), encoding="utf-8")
            report["qrels"] = str(options["qrels_out"])
        if options["save_run"] is not None:
            report["run_id"] = save_human_run(study, report, options["save_run"] or None).pk
        run_ids = preference_access.requested_ids(options["compare"])
        if run_ids:
            compared = preference_access.compare(
                study,
                run_ids,
                persistence=options["p"],
                depth=options["depth"],
                model=report["model"],
                alpha=options["alpha"],
            )
            report["compared"] = compared
        return report

    def format_text(self, summary):
        lines = [f"{summary['model']} scores, {summary['judgments']} answers"]
        for query, section in summary["queries"].items():
            ranked = ", ".join(f"{p} {section['scores'][p]:+.3f}" for p in section["ranking"][:10])
            lines.append(f"  {query}: {ranked}{' …' if len(section['ranking']) > 10 else ''}")
        for run_id, entry in summary.get("compared", {}).get("runs", {}).items():
            lines.append(f"  run {run_id}: compatibility {entry['compatibility']}, Kendall tau {entry['kendall_tau']}")
        if "run_id" in summary:
            lines.append(f"human ranking stored as run {summary['run_id']}")
        return "\n".join(lines)
