"""`export_qrels STUDY_ID [--aggregate majority|mean|median|dawid-skene|mace|glad] [--source
humans|judge|both --judge NAME] [--provenance] [--out FILE] [--beir DIR] [--json]`: a relevance
study's aggregated labels (the humans', a judge's, or both) as TREC qrels (`qid 0 docid
relevance`), or with --provenance as JSON lines saying where each label comes from
(`label_source`: adjudicated, unanimous, single or aggregated, with `label_method`).

Without --out or --beir the qrels lines go to stdout and nothing else does (like export_run), so
`export_qrels 3 > study3.qrels` gives a clean file. With --out and/or --beir the files are
written and the summary printed (one JSON line with --json): keys `study`, `aggregate`, `qrels`,
`queries`, `relevant`, `ties`, `adjudicated`, `unjudged`, `label_sources`, `sent_back`, plus `out` /
`beir`.
"""

from django.core.management.base import CommandError

from annotation.services import get_study
from evaluation.aggregates import AGGREGATES, SOURCES
from evaluation.qrels import relevance_qrels, write_beir_folder, write_qrels_file
from judges.services import get_judge
from retrieval.errors import InputError
from retrieval.management.base import JsonCommand, write_lines


class Command(JsonCommand):
    help = "Export a relevance study's aggregated labels as TREC qrels (stdout, a file, or a BEIR folder)."

    def add_command_arguments(self, parser):
        parser.add_argument("study_id", type=int, metavar="STUDY_ID")
        parser.add_argument(
            "--aggregate",
            choices=AGGREGATES,
            default="majority",
            help="majority vote (ties: the lower label), the scale value nearest the mean or median "
            "(halfway: the lower one), or a model of annotator competence (Dawid-Skene, MACE, GLAD; "
            "humans or both). Adjudications always win.",
        )
        parser.add_argument(
            "--source", choices=SOURCES, default="humans", help="Whose labels: humans, a judge, or both."
        )
        parser.add_argument("--judge", default=None, help="The judge for --source judge|both (its latest version).")
        parser.add_argument(
            "--provenance",
            action="store_true",
            help="JSON lines instead of TREC lines: each qrel with its label_source, label_method and labels.",
        )
        parser.add_argument("--out", metavar="FILE", help="Write the qrels lines to FILE instead of stdout.")
        parser.add_argument(
            "--beir",
            metavar="DIR",
            help="Also write a BEIR folder (corpus.jsonl, queries.jsonl, qrels.tsv, pools.jsonl) for import_beir.",
        )

    def handle(self, *args, **options):
        if options["out"] or options["beir"]:
            return super().handle(*args, **options)
        try:
            export = self.export(**options)
        except InputError as exc:
            raise CommandError(str(exc)) from exc
        write_lines(self, export.lines(options["provenance"]))

    def export(self, *, study_id, aggregate, source, judge, **options):
        chosen = get_judge(judge) if judge or source != "humans" else None
        return relevance_qrels(get_study(study_id, field="study"), aggregate, source, chosen)

    def run(self, *, out, beir, provenance, **options):
        export = self.export(**options)
        summary = export.summary()
        if out:
            summary["out"] = str(write_qrels_file(export, out, provenance))
        if beir:
            summary["beir"] = write_beir_folder(export, beir)["beir"]
        return summary
