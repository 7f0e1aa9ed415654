"""`export_dataset STUDY_ID OUT [--format parquet|disk] [--model-run RUN_ID ...] [--json]`: the
study's items with human answers and model/judge answers as a Hugging Face dataset in the new
folder OUT (`items.parquet`, or `datasets` save_to_disk). Keys `study`, `items`,
`human_answers`, `model_answers`, `format`, `out`, `files`. Staff data: it names the gold."""

from pathlib import Path

from annotation.services import get_study
from retrieval.errors import InputError
from retrieval.management.base import JsonCommand
from retrieval.models import Run

from ...services.datasets_export import FORMATS, export_dataset


class Command(JsonCommand):
    help = "Export a study's items, human answers and model/judge answers as a Hugging Face dataset."

    def add_command_arguments(self, parser):
        parser.add_argument("study_id", type=int)
        parser.add_argument("out", type=Path, help="A new (or empty) folder.")
        parser.add_argument("--format", choices=FORMATS, default="parquet")
        parser.add_argument("--model-run", type=int, action="append", default=[], help="A run's answers (repeatable).")

    def run(self, **options) -> dict:
        study = get_study(options["study_id"])
        runs = []
        for run_id in options["model_run"]:
            run = Run.objects.select_related("retriever").filter(pk=run_id).first()
            if run is None:
                raise InputError(f"no run {run_id}", field="model_run")
            runs.append(run)
        return export_dataset(study, options["out"], fmt=options["format"], model_runs=runs)
