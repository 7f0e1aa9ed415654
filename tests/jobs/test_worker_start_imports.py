"""What a Celery worker and the commands that queue imports load at start (issue 26): spaCy, and
torch that thinc imports with it, cost 4-5 s of CPU to import, and every worker paid them at
start because the task modules reached retrieval.text through qrels reading and the importers;
`import_relic --async` paid them only to queue jobs. Sentence segmentation is now
retrieval.segmentation, imported where plain text is segmented and nowhere else."""

import subprocess
import sys

from tests.conftest import PROJECT_ROOT

SEGMENTATION = ("spacy", "thinc", "torch")


def loaded_after(tmp_path, statements: str) -> list[str]:
    """Which of SEGMENTATION a fresh Python has imported after `statements` (Django set up)."""
    probe = (
        "import sys, django; django.setup();"
        f"{statements};"
        f"print(','.join(name for name in {SEGMENTATION!r} if name in sys.modules))"
    )
    env = {
        "DJANGO_SETTINGS_MODULE": "marginalia.settings",
        "PATH": "/usr/bin:/bin",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "MARGINALIA_DATA_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, check=True
    )
    return [name for name in result.stdout.rstrip("\n").rsplit("\n", 1)[-1].split(",") if name]


def test_a_worker_start_imports_every_task_module_and_no_sentence_segmentation(tmp_path):
    """What celery's Django fix-up does before a worker is ready: the system checks (the URLconf),
    then every app's task modules."""
    start = (
        "from django.core.checks import run_checks; run_checks();"
        "from marginalia.celery import app; app.loader.import_default_modules();"
        "assert {'retrieval.tasks.import_part', 'evaluation.tasks.compute_study_report',"
        " 'judges.tasks.label_pool_on_long'} <= set(app.tasks)"
    )
    assert loaded_after(tmp_path, start) == []


def test_queueing_an_import_and_reading_qrels_import_no_sentence_segmentation(tmp_path):
    """import_relic and import_book queue their parts without segmenting; the RELiC and BEIR
    importers and the qrels reader store text that comes segmented."""
    modules = (
        "import retrieval.management.commands.import_relic, retrieval.management.commands.import_book,"
        " retrieval.management.commands.import_beir, retrieval.services.import_jobs,"
        " retrieval.services.qrels_import, console.upload_importers"
    )
    assert loaded_after(tmp_path, modules) == []


def test_segmenting_a_book_loads_spacy_where_it_is_used(tmp_path):
    """The peer of the tests above: the probe sees spaCy once something segments."""
    segment = "from retrieval.segmentation import split_sentences; split_sentences('One. Two.')"
    assert "spacy" in loaded_after(tmp_path, segment)
