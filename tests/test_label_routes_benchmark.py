"""benchmarks/label_routes.py at a tiny size: every label route answers on the study it builds,
each is printed beside its peer's steps measured in the same run, and the last line is one JSON
object whose ratios are the route's seconds over the sum of its peer's; a second run on the
same database measures the study the first one built (the 100K-item figures in
docs/deployment.md come from the same script)."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STUDY_ROUTES = ("aggregate majority", "aggregate dawid-skene", "soft-labels majority", "soft-labels dawid-skene")


def benchmark(*arguments) -> str:
    result = subprocess.run(
        [sys.executable, "benchmarks/label_routes.py", "--items", "60", "--repeats", "1", "--json", *arguments],
        cwd=ROOT,
        env={key: value for key, value in os.environ.items() if key != "DATABASE_URL"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def database(tmp_path_factory):
    return f"sqlite:///{tmp_path_factory.mktemp('label-routes-db') / 'db.sqlite3'}"


@pytest.fixture(scope="module")
def run(tmp_path_factory, database):
    saved = tmp_path_factory.mktemp("label-routes")
    stdout = benchmark("--save", str(saved), "--database-url", database)
    assert "study of 60 items x 3 judgments built" in stdout
    return stdout, json.loads(stdout.strip().splitlines()[-1]), saved


def test_every_label_route_is_timed_against_the_sum_of_its_peers_steps(run):
    stdout, figures, _ = run
    assert (figures["items"], figures["judgments"], figures["repeats"]) == (60, 180, 1)
    routes = figures["routes"]
    assert set(routes) == {*STUDY_ROUTES, "bundle"}
    for name, route in routes.items():
        assert route["status"] == 200 and route["bytes"] > 0, name
        steps = route["peer"]["steps"]
        expected = ("read", "encode", "zip") if name == "bundle" else ("read", "fit", "encode")
        assert tuple(steps) == expected, name
        for clock in ("wall", "cpu"):
            assert route["route"][clock] > 0 and all(step[clock] >= 0 for step in steps.values()), name
            assert route["peer"][clock] == pytest.approx(sum(step[clock] for step in steps.values()))
            assert route["ratio"][clock] == pytest.approx(route["route"][clock] / route["peer"][clock])
        assert any(line.startswith(name + " ") for line in stdout.splitlines()), name


def test_the_saved_bodies_are_the_routes_answers(run):
    _, figures, saved = run
    aggregate = json.loads((saved / "aggregate-majority.json").read_bytes())
    assert (aggregate["method"], aggregate["items"], aggregate["judgments"]) == ("majority", 60, 180)
    lines = (saved / "soft-labels-dawid-skene.json").read_text().splitlines()
    assert len(lines) == 60 and {json.loads(line)["method"] for line in lines} == {"dawid-skene"}
    with zipfile.ZipFile(saved / "bundle.zip") as bundle:
        names = {name.split("/", 1)[1] for name in bundle.namelist()}
        corpus = next(name for name in bundle.namelist() if name.endswith("/corpus.jsonl"))
        assert len(bundle.read(corpus).splitlines()) == 180  # three passages shown per item
    assert {"corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "bundle.json", "trec/qrels"} <= names
    assert (saved / "bundle.zip").stat().st_size == figures["routes"]["bundle"]["bytes"]


def test_a_second_run_on_the_same_database_measures_the_study_built_by_the_first(run, database):
    stdout = benchmark("--database-url", database)
    assert "reusing the study of 60 items x 3 judgments" in stdout and " built in " not in stdout
    figures = json.loads(stdout.strip().splitlines()[-1])
    assert figures["judgments"] == 180 and figures["routes"].keys() == run[1]["routes"].keys()
