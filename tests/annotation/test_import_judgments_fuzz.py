"""Property-based fuzzing of import_judgments (hypothesis): a mutated valid file of proxy or label
judgments is imported or refused cleanly, never a traceback, and a refusal writes nothing (no
judgment, assignment or user)."""

import json

import pytest
from django.contrib.auth import get_user_model
from hypothesis import given
from hypothesis import strategies as st

from annotation.models import Assignment, Judgment
from tests.factories import export_study, make_plot_relevance_study, make_relic_proxy_study
from tests.mutations import FUZZ_SETTINGS, assert_clean_outcome, mutated

pytestmark = pytest.mark.django_db


def row_counts() -> dict:
    return {
        "judgments": Judgment.objects.count(),
        "assignments": Assignment.objects.count(),
        "users": get_user_model().objects.count(),
    }


def jsonl(rows) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


@pytest.fixture
def proxy_file():
    study = make_relic_proxy_study(2)
    rows = [
        {"item": row["item"], "annotator": name, "choice": row["gold"], "seconds": 12.5}
        for row in export_study(study)
        for name in ("ann_a", "ann_b")
    ]
    return study, jsonl(rows)


@pytest.fixture
def label_file():
    study = make_plot_relevance_study(label_schema={"scale": "graded-0-3", "rationale": "optional"})
    rows = [
        {"item": item.pk, "annotator": "ann_a", "label": 2, "rationale": "same plot", "seconds": 4}
        for item in study.items.order_by("position")
    ]
    return study, jsonl(rows)


@FUZZ_SETTINGS
@given(mutation=st.data())
def test_proxy_judgments_refuse_cleanly_or_import(tmp_path, proxy_file, mutation):
    study, valid = proxy_file
    path = tmp_path / "judgments.jsonl"
    path.write_bytes(mutation.draw(mutated(valid)))
    assert_clean_outcome("import_judgments", [study.pk, path], row_counts)


@FUZZ_SETTINGS
@given(mutation=st.data())
def test_label_judgments_refuse_cleanly_or_import(tmp_path, label_file, mutation):
    study, valid = label_file
    path = tmp_path / "judgments.jsonl"
    path.write_bytes(mutation.draw(mutated(valid)))
    assert_clean_outcome("import_judgments", [study.pk, path], row_counts)
