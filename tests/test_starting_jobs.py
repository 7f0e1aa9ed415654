"""Starting any job answers at once (issue 21.3): starting a dense run held the browser for 15 s,
because the request imported the encoder's module (torch, sentence-transformers) to look up a
retriever's name; starting a training imported the training module (torch) and, from a study,
loaded the model for its mask token. Each start goes through the web process in a fresh Python
(the forms and the API, as a browser and a client send them) and nothing heavy may be imported
by any of them: the workers load what they compute with."""

import json
import subprocess
import sys

import pytest
import redis as redis_client

from jobs.management.commands.run_platform import free_port, start_redis, stop_process
from tests.conftest import PROJECT_ROOT

pytestmark = pytest.mark.redis

HEAVY = ("torch", "transformers", "sentence_transformers", "spacy", "openai", "scipy", "sklearn", "pandas")

PROBE = """
import json, sys
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.test import Client
from tests.factories import grant, make_proxy_study, make_relic_collection, make_user, add_judgment, make_annotator
from annotation.models import Study
from retrieval.models import Query, Retriever

staff = grant(make_user("lead", staff=True), "judges.manage_judge_endpoints")
collection = make_relic_collection(3, name="starts")
Query.objects.filter(collection=collection).update(split="train")
Retriever.objects.create(name="trained-minilm", kind="dense", model_path="/models/minilm")
study = make_proxy_study(gold_positions=[0, 1, 0], candidates=3)
Study.objects.filter(pk=study.pk).update(judgments_per_item=1)
add_judgment(study.items.first(), make_annotator("ann"), 0)
client = Client()
client.force_login(staff)
training = {"batch_size": 4, "learning_rate": 1e-4, "epochs": 1, "patience": 1, "seed": 0, "base_model": "",
            "max_steps": ""}
run = {"collection": collection.pk, "k1": 0.5, "b": 0.9, "context_left": 4, "context_right": 4, "depth": 10}
starts = {
    "bm25 run (form)": client.post("/dashboard/", {**run, "retriever": "bm25", "model": ""}),
    "dense run (form)": client.post("/dashboard/", {**run, "retriever": "dense", "model": ""}),
    "dense run of a trained retriever (API)": client.post(
        "/api/runs/", {**run, "retriever": "dense", "model": "trained-minilm"}, content_type="application/json"),
    "training (form)": client.post("/dashboard/train/", {**training, "collection": collection.pk, "name": "t1",
                                                         "context_left": 4, "context_right": 4}),
    "training (API)": client.post("/api/retrievers/train/", {"collection": collection.pk, "name": "t2"},
                                  content_type="application/json"),
    "training on a study (form)": client.post(f"/studies/{study.pk}/train/", {**training, "name": "t3"}),
    "embedded judge (panel)": client.post(f"/studies/{study.pk}/judges/run/", {"judge": ""}),
    "endpoint judge (API)": client.post("/api/judges/", {"name": "e", "backend": "openai",
        "settings": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}, content_type="application/json"),
}
starts["endpoint judge started (API)"] = client.post(f"/api/studies/{study.pk}/judge/", {"judge": "e"},
                                                     content_type="application/json")
heavy = [name for name in HEAVY if name in sys.modules]
print(json.dumps({"status": {name: response.status_code for name, response in starts.items()}, "heavy": heavy}))
"""


def test_every_job_start_answers_without_loading_a_model_or_its_libraries(tmp_path):
    server, url = start_redis(free_port())
    try:
        result = subprocess.run(
            [sys.executable, "-c", f"HEAVY = {HEAVY!r}\n{PROBE}"],
            cwd=PROJECT_ROOT,
            env={
                "PATH": "/usr/bin:/bin",
                "DJANGO_SETTINGS_MODULE": "marginalia.settings",
                "DJANGO_ALLOWED_HOSTS": "testserver",
                "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
                "MARGINALIA_DATA_DIR": str(tmp_path / "data"),
                "MARGINALIA_OUTBOUND_ALLOW": "127.0.0.1",
                "REDIS_URL": url,
                "HF_HUB_OFFLINE": "1",
            },
            capture_output=True,
            text=True,
            timeout=600,
        )
        broker = redis_client.Redis.from_url(url)
        queued = {queue: broker.llen(queue) for queue in ("cpu", "long", "gpu")}
        broker.close()
    finally:
        stop_process(server)
    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert all(status in (201, 202, 302) for status in outcome["status"].values()), outcome["status"]
    assert outcome["heavy"] == []
    # Every start reached its workers' queue: BM25 shards; the endpoint judge; two dense runs'
    # shards, three trainings and the embedded judge.
    assert queued["cpu"] >= 1 and queued["long"] == 1 and queued["gpu"] >= 6, queued
