"""Label aggregation by annotator competence against crowd-kit itself: each model's labels,
posteriors and competence equal what crowd-kit's classes give on the same DataFrame (GLAD, which
evaluation.glad runs on arrays for speed, to 1e-9), majority ties go to the lowest label as
everywhere in the platform, and MACE's restarts in crowd-kit 1.4.2 repeat one start."""

import numpy as np
import pandas as pd
import pytest
from crowdkit.aggregation import GLAD, MACE, DawidSkene, MajorityVote
from crowdkit.aggregation.utils import get_accuracy
from scipy.special import expit

from annotation.majority import majority_votes
from evaluation.label_models import aggregate, ratings_frame
from retrieval.errors import InputError
from tests.evaluation.simulated_annotators import CROWD, simulate, true_accuracies

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

VALUES = [0, 1, 2]


def crowd_frame(triples) -> pd.DataFrame:
    """The frame a test hands to crowd-kit: built here from the triples, not by the code under test."""
    rows = sorted(triples, key=lambda triple: (triple[1], triple[0]))
    return pd.DataFrame([(task, name, label) for name, task, label in rows], columns=["task", "worker", "label"])


@pytest.fixture(scope="module")
def crowd():
    rng = np.random.default_rng(7)
    truth = {task: int(rng.integers(3)) for task in range(120)}
    triples = simulate(truth, VALUES, per_task=5, seed=11)
    return truth, triples, crowd_frame(triples)


def test_the_frame_is_crowd_kits_layout_sorted_by_task_then_annotator(crowd):
    _, triples, frame = crowd
    pd.testing.assert_frame_equal(ratings_frame(reversed(triples)), frame)
    with pytest.raises(ValueError, match="labelled task 0 twice"):
        ratings_frame([("a", 0, 1), ("a", 0, 2)])


def test_majority_is_crowd_kits_vote_with_ties_to_the_lowest_label_as_in_the_platform(crowd):
    _, triples, frame = crowd
    ours, theirs = aggregate(triples, "majority"), MajorityVote().fit(frame)
    by_task: dict = {}
    for _, task, label in triples:
        by_task.setdefault(task, []).append(label)
    platform = dict(zip(by_task, majority_votes(list(by_task.values()), tie_rule="lowest")))
    assert ours.labels == {task: vote.label for task, vote in platform.items()}
    untied = [task for task, vote in platform.items() if not vote.is_tie]
    assert 0 < len(untied) < len(platform)  # the data has ties, and crowd-kit agrees wherever there is none
    assert {task: ours.labels[task] for task in untied} == theirs.labels_[untied].to_dict()
    expected = get_accuracy(frame, pd.Series(ours.labels), by="worker")
    assert ours.competence == pytest.approx(expected.to_dict(), abs=1e-15)
    for task, row in theirs.probas_.iterrows():
        assert ours.posteriors[task] == pytest.approx({value: row.get(value, 0.0) for value in VALUES})
    tied = aggregate([("a", "t", 2), ("b", "t", 0), ("c", "u", 1)], "majority")
    assert tied.labels["t"] == 0 and tied.posteriors["t"] == {0: 0.5, 1: 0.0, 2: 0.5}


def test_dawid_skene_is_crowd_kits_with_accuracy_from_its_confusion_matrices(crowd):
    _, triples, frame = crowd
    ours, theirs = aggregate(triples, "dawid-skene", values=VALUES), DawidSkene().fit(frame)
    assert ours.labels == theirs.labels_.to_dict()
    for task, row in theirs.probas_.iterrows():
        assert ours.posteriors[task] == pytest.approx(row.to_dict(), abs=1e-12)
    for name in CROWD:
        errors = theirs.errors_.loc[name]  # rows: label given, columns: true label
        expected = sum(theirs.priors_[c] * errors.loc[c, c] for c in VALUES if c in errors.index)
        assert ours.competence[name] == pytest.approx(expected, abs=1e-12)
        matrix = np.array(ours.confusion[name])
        assert matrix.sum(axis=1) == pytest.approx([1, 1, 1])  # each true label's row is a distribution
        assert matrix[1, 2] == pytest.approx(errors.loc[2, 1] if 2 in errors.index else 0.0)


def test_mace_is_crowd_kits_with_its_ten_restarts_which_repeat_one_seeded_start(crowd):
    _, triples, frame = crowd
    ours, theirs = aggregate(triples, "mace", seed=5), MACE(random_state=5).fit(frame)  # default 10 restarts
    assert ours.labels == theirs.labels_.to_dict()
    workers = pd.factorize(frame["worker"])[1]
    assert ours.competence == pytest.approx(dict(zip(workers, theirs.spamming_[:, 1])), abs=1e-12)
    for task, row in theirs.probas_.iterrows():
        assert ours.posteriors[task] == pytest.approx(row.to_dict(), abs=1e-12)
    assert aggregate(triples, "mace", seed=5) == ours  # seeded: reproducible


def test_glad_on_arrays_gives_crowd_kits_glad(crowd):
    _, triples, frame = crowd
    ours, theirs = aggregate(triples, "glad"), GLAD().fit(frame)
    assert ours.labels == theirs.labels_.to_dict()
    for task, row in theirs.probas_.iterrows():
        assert ours.posteriors[task] == pytest.approx(row.to_dict(), abs=1e-9)
    for name, alpha in theirs.alphas_.items():
        assert ours.annotator_details[name]["ability"] == pytest.approx(alpha, abs=1e-9)
        tasks = frame.loc[frame["worker"] == name, "task"]
        expected = expit(alpha * np.exp(theirs.betas_[tasks].to_numpy())).mean()
        assert ours.competence[name] == pytest.approx(expected, abs=1e-9)


@pytest.fixture(scope="module")
def fitted(crowd):
    _, triples, _ = crowd
    return {method: aggregate(triples, method) for method in ("majority", "dawid-skene", "mace", "glad")}


def test_competence_models_find_the_spammers_and_the_adversary_and_beat_the_majority(crowd, fitted):
    truth, triples, _ = crowd
    accuracy = true_accuracies(triples, truth)
    recovered = {
        method: np.mean([model.labels[task] == label for task, label in truth.items()])
        for method, model in fitted.items()
    }
    names = sorted(accuracy)
    for method in ("dawid-skene", "mace", "glad"):
        competence = fitted[method].competence
        assert recovered[method] > recovered["majority"], recovered
        good = min(competence[name] for name in ("expert", "careful", "steady"))
        assert max(competence[name] for name in ("spammer-1", "spammer-2", "spammer-3", "adversary")) < good
        # Competence follows the annotators' true accuracy (rank correlation over all of them).
        rho = pd.Series([competence[n] for n in names]).corr(pd.Series([accuracy[n] for n in names]), "spearman")
        assert rho > 0.7, (method, rho)
    assert fitted["majority"].competence["adversary"] > 0.1  # the majority cannot tell who misleads it


def test_one_label_everywhere_has_nothing_to_weigh_and_an_unknown_method_is_refused():
    triples = [("a", 1, 2), ("b", 1, 2), ("a", 2, 2)]
    for method in ("majority", "dawid-skene", "mace", "glad"):
        result = aggregate(triples, method, values=[0, 1, 2])
        assert result.labels == {1: 2, 2: 2}
        assert result.posteriors[1] == {0: 0.0, 1: 0.0, 2: 1.0}
        assert result.competence == {"a": 1.0, "b": 1.0}
    assert aggregate([], "glad").labels == {}
    with pytest.raises(InputError, match="field 'method': unknown method 'wawa'"):
        aggregate(triples, "wawa")
