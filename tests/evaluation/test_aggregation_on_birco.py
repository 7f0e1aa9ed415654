"""Label aggregation on real data: BIRCO's RELiC dev qrels as the truth of a relevance study made
from every query's pool, judged by simulated annotators of known accuracy (five good ones of
different skill, three spammers answering at random, one adversary) whose answers go in through
`import_judgments`.

- On four queries, `aggregate_labels` gives crowd-kit's Dawid-Skene, MACE and GLAD labels and
  competences, crowd-kit called here on a frame built from `export_judgments`' rows.
- On all fifty, the competence models recover the qrels better than the majority vote and rank
  the annotators as their true accuracy does. Run with -s to print the figures:
      .venv/bin/python -m pytest tests/evaluation/test_aggregation_on_birco.py -s -k recover
"""

import io
import json

import numpy as np
import pandas as pd
import pytest
from crowdkit.aggregation import GLAD, MACE, DawidSkene
from django.core.management import call_command
from scipy.special import expit

from annotation.models import Study
from annotation.services import qrel_label
from tests.evaluation.simulated_annotators import CROWD, simulate, true_accuracies
from tests.factories import call_json_command, write_jsonl

pytestmark = [pytest.mark.django_db, pytest.mark.data, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

METHODS = ("majority", "dawid-skene", "mace", "glad")


def judged_birco_study(shared_data, tmp_path, n_queries: int) -> tuple[Study, dict[int, int], list]:
    """The study, item id -> its qrel, and the simulated (annotator, item, label) judgments."""
    call_json_command("import_beir", shared_data / "birco-relic-dev", "--collection", "birco-relic-dev")
    created = call_json_command(
        "create_study",
        "--kind",
        "relevance",
        "--collection",
        "birco-relic-dev",
        "--use-pools",
        "--n-queries",
        n_queries,
        "--scale",
        "binary",
        "--judgments-per-item",
        5,
        "--seed",
        3,
        "--name",
        f"birco simulated crowd {n_queries}",
    )
    study = Study.objects.get(pk=created["study_id"])
    truth = {item.pk: qrel_label(item) for item in study.items.order_by("position")}
    judgments = simulate(truth, [0, 1], CROWD, per_task=5, seed=17)
    path = tmp_path / "simulated.jsonl"
    write_jsonl(path, [{"item": item, "annotator": name, "label": label} for name, item, label in judgments])
    assert call_json_command("import_judgments", study.pk, path) == {"imported": len(judgments), "rejected": 0}
    return study, truth, judgments


def exported_frame(study) -> pd.DataFrame:
    """crowd-kit's frame from export_judgments' rows: item, annotator, label."""
    out = io.StringIO()
    call_command("export_judgments", study.pk, stdout=out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    frame = pd.DataFrame(
        [(row["item"], row["annotator"], row["label"]) for row in rows if not row["voided"]],
        columns=["task", "worker", "label"],
    )
    return frame.sort_values(["task", "worker"]).reset_index(drop=True)


def test_aggregate_labels_gives_crowd_kits_labels_and_competences_on_birco_judgments(shared_data, tmp_path):
    study, _, judgments = judged_birco_study(shared_data, tmp_path, n_queries=4)
    frame = exported_frame(study)
    assert len(frame) == len(judgments) > 900
    ours = {method: call_json_command("aggregate_labels", study.pk, "--method", method) for method in METHODS[1:]}

    ds = DawidSkene().fit(frame)
    assert ours["dawid-skene"]["labels"] == {str(task): label for task, label in ds.labels_.items()}
    for name in CROWD:
        errors = ds.errors_.loc[name]
        expected = sum(ds.priors_[c] * errors.loc[c, c] for c in (0, 1) if c in errors.index)
        assert ours["dawid-skene"]["competence"][name] == pytest.approx(expected, abs=1e-12)

    mace = MACE(random_state=study.seed).fit(frame)
    assert ours["mace"]["labels"] == {str(task): label for task, label in mace.labels_.items()}
    workers = pd.factorize(frame["worker"])[1]
    assert ours["mace"]["competence"] == pytest.approx(dict(zip(workers, mace.spamming_[:, 1])), abs=1e-12)

    glad = GLAD().fit(frame)
    assert ours["glad"]["labels"] == {str(task): label for task, label in glad.labels_.items()}
    for name, alpha in glad.alphas_.items():
        tasks = frame.loc[frame["worker"] == name, "task"]
        expected = expit(alpha * np.exp(glad.betas_[tasks].to_numpy())).mean()
        assert ours["glad"]["competence"][name] == pytest.approx(expected, abs=1e-9)


def test_competence_models_recover_the_qrels_better_than_the_majority(shared_data, tmp_path):
    study, truth, judgments = judged_birco_study(shared_data, tmp_path, n_queries=50)
    assert len(truth) > 2500 and sum(truth.values()) == 50
    accuracy = true_accuracies(judgments, truth)
    outputs = {method: call_json_command("aggregate_labels", study.pk, "--method", method) for method in METHODS}
    recovered = {
        method: np.mean([output["labels"][str(item)] == label for item, label in truth.items()])
        for method, output in outputs.items()
    }
    relevant_found = {
        method: sum(output["labels"][str(item)] == 1 for item, label in truth.items() if label == 1)
        for method, output in outputs.items()
    }
    false_relevant = {
        method: sum(output["labels"][str(item)] == 1 for item, label in truth.items() if label == 0)
        for method, output in outputs.items()
    }
    print(f"\nBIRCO RELiC dev: {len(truth)} (query, passage) pairs, 5 simulated judgments each")
    print(f"{'method':<12} {'accuracy':>9} {'relevant found':>15} {'false relevant':>15} {'changed':>8}")
    for method in METHODS:
        print(
            f"{method:<12} {recovered[method]:>9.4f} {relevant_found[method]:>12} / 50 {false_relevant[method]:>15}"
            f" {outputs[method]['changed_from_majority']:>8}"
        )
    print(f"{'annotator':<10} {'true':>6}" + "".join(f" {method:>12}" for method in METHODS))
    for name in CROWD:
        print(
            f"{name:<10} {accuracy[name]:>6.3f}" + "".join(f" {outputs[m]['competence'][name]:>12.3f}" for m in METHODS)
        )

    names = sorted(accuracy)
    for method in METHODS[1:]:
        assert recovered[method] > recovered["majority"] + 0.02, recovered
        competence = outputs[method]["competence"]
        rho = pd.Series([competence[n] for n in names]).corr(pd.Series([accuracy[n] for n in names]), "spearman")
        assert rho > 0.8, (method, rho)
        assert competence["adversary"] < min(competence[n] for n in ("expert", "careful", "steady", "hasty"))
