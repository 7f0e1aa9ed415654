"""What a Celery worker and the commands that queue imports load at start (issue 26): spaCy, and
torch that thinc imports with it, cost 4-5 s of CPU to import, and every worker paid them at
start because the task modules reached retrieval.text through qrels reading and the importers;
`import_relic --async` paid them only to queue jobs. Sentence segmentation is now
retrieval.segmentation, imported where plain text is segmented and nowhere else. Likewise the
reports' statistics (scipy.stats, crowd-kit with pandas, sklearn and nltk) and the judges' openai
client, about 3.5 s of CPU per worker start, load inside the evaluation and judges tasks that
compute with them."""

import subprocess
import sys

from tests.conftest import PROJECT_ROOT

SEGMENTATION = ("spacy", "thinc", "torch")
STATISTICS_AND_CLIENTS = ("scipy.stats", "crowdkit", "pandas", "sklearn", "nltk", "openai")
# What celery's Django fix-up does before a worker is ready: the system checks (the URLconf),
# then every app's task modules.
WORKER_START = (
    "from django.core.checks import run_checks; run_checks();"
    "from marginalia.celery import app; app.loader.import_default_modules();"
    "assert {'retrieval.tasks.import_part', 'evaluation.tasks.compute_study_report',"
    " 'judges.tasks.label_pool_on_long'} <= set(app.tasks)"
)


def loaded_after(tmp_path, statements: str, modules: tuple[str, ...] = SEGMENTATION) -> list[str]:
    """Which of `modules` a fresh Python has imported after `statements` (Django set up)."""
    probe = (
        "import sys, django; django.setup();"
        f"{statements};"
        f"print(','.join(name for name in {modules!r} if name in sys.modules))"
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
    assert loaded_after(tmp_path, WORKER_START) == []


def test_a_worker_start_imports_no_statistics_library_and_no_openai_client(tmp_path):
    """Reports, judge cards, the agreement check and judging import them inside their tasks."""
    assert loaded_after(tmp_path, WORKER_START, STATISTICS_AND_CLIENTS) == []


def test_the_modules_the_evaluation_and_judges_tasks_compute_with_load_them(tmp_path):
    """The peer of the test above: what those tasks import when they run brings every one of them."""
    computing = (
        "import evaluation.services, evaluation.judge_card, evaluation.crowd_report,"
        " judges.asking, judges.pools, judges.post_editing"
    )
    assert loaded_after(tmp_path, computing, STATISTICS_AND_CLIENTS) == list(STATISTICS_AND_CLIENTS)


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
