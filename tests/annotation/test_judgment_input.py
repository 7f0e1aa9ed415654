"""import_judgments and the submit API under the one input rule: deep nesting, lone surrogates,
NUL characters and out-of-range numbers are refused with one line (or a 400) and nothing is
written; a BOM is accepted; an empty file is refused."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Assignment, Judgment, StudyBlock
from annotation.services import claim_next_item
from tests.factories import (
    api_client,
    export_study,
    make_annotator,
    make_plot_relevance_study,
    make_relic_proxy_study,
    make_user,
    submit_url,
    write_jsonl,
)

pytestmark = pytest.mark.django_db

DEEP = "[" * 100_000 + "]" * 100_000
SCHEMA = {"scale": "graded-0-3", "rationale": "optional"}


def refusal(study, path) -> str:
    with pytest.raises(CommandError) as failure:
        call_command("import_judgments", str(study.pk), str(path))
    assert not Judgment.objects.exists() and not Assignment.objects.exists()
    message = str(failure.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def label_row(study, **changes) -> str:
    item = study.items.order_by("position").first()
    return json.dumps({"item": item.pk, "annotator": "ann1", "label": 2, "rationale": "same plot", **changes})


@pytest.mark.parametrize(
    "raw, fragments",
    [
        (lambda row: row.replace('"same plot"', DEEP), [":1: ", "JSON nested deeper than 32 levels"]),
        (lambda row: row.replace("same plot", "same \\ud800 plot"), [":1: ", "field 'rationale'", "lone surrogate"]),
        (lambda row: row.replace("same plot", "same \\u0000 plot"), [":1: ", "field 'rationale'", "NUL character"]),
        (lambda row: row[:-1] + ', "seconds": ' + "9" * 400 + "}", [":1: ", "field 'seconds'", "400 digits"]),
        (lambda row: row[:-1] + f', "seconds": {2**63}' + "}", [":1: ", "field 'seconds'", "out of range"]),
        (lambda row: row[:-1] + ', "seconds": 1e400}', [":1: ", "field 'seconds'", "not a finite number"]),
    ],
    ids=["100000-levels", "lone-surrogate", "nul", "400-digit-seconds", "2**63-seconds", "1e400-seconds"],
)
def test_bad_rows_are_refused_naming_file_line_and_field(tmp_path, raw, fragments):
    study = make_plot_relevance_study(label_schema=SCHEMA)
    path = tmp_path / "rows.jsonl"
    path.write_text(raw(label_row(study)) + "\n", encoding="utf-8")

    message = refusal(study, path)

    assert message.startswith(f"{path}:")
    for fragment in fragments:
        assert fragment in message


def test_a_bom_is_accepted_as_in_every_other_importer(tmp_path):
    study = make_plot_relevance_study(label_schema=SCHEMA)
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (label_row(study) + "\n").encode())

    call_command("import_judgments", str(study.pk), str(path))

    assert Judgment.objects.get().rationale == "same plot"


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"], ids=["0-bytes", "blank-lines"])
def test_a_file_without_judgments_is_refused(tmp_path, content):
    study = make_plot_relevance_study(label_schema=SCHEMA)
    path = tmp_path / "rows.jsonl"
    path.write_bytes(content)

    assert refusal(study, path) == f"{path}: the file has no judgments"


def test_seconds_within_range_are_kept_and_capped(tmp_path):
    study = make_relic_proxy_study(1)
    row = export_study(study)[0]
    rows = [{"item": row["item"], "annotator": "ann", "choice": row["gold"], "seconds": 2**63 - 1}]
    call_command("import_judgments", str(study.pk), str(write_jsonl(tmp_path / "rows.jsonl", rows)))
    assert 0 < Judgment.objects.get().seconds < 2**63


# --- the submit API --------------------------------------------------------------------------


@pytest.fixture
def claimed():
    """(client, study, item) for an annotator holding a claim on a proxy item."""
    study = make_relic_proxy_study(1)
    annotator = make_annotator("ann")
    assignment = claim_next_item(study, annotator)
    return api_client(annotator), study, assignment.item


@pytest.mark.parametrize(
    "body, fragment",
    [
        ('{"item": 1, "position": 0, "rubric": ' + DEEP + "}", "JSON nested deeper than 32 levels"),
        ('{"item": ' + "9" * 400 + ', "position": 0}', "field 'item': integer with 400 digits is out of range"),
        ('{"item": ' + str(2**63) + ', "position": 0}', "field 'item'"),
        ('{"item": 1, "position": 0, "rubric": {"a": "\\ud800"}}', "field 'rubric.a': contains a lone surrogate"),
        ('{"item": 1, "position": 0, "spans": ["\\u0000"]}', "field 'spans[0]': contains a NUL character"),
    ],
    ids=["100000-levels", "400-digit-item", "2**63-item", "surrogate", "nul"],
)
def test_submit_refuses_with_400_naming_the_field(claimed, body, fragment):
    client, study, _ = claimed

    response = client.post(submit_url(study), data=body, content_type="application/json")

    assert response.status_code == 400
    assert fragment in response.json()["detail"]
    assert not Judgment.objects.exists()


def test_submit_accepts_a_bom(claimed):
    client, study, item = claimed
    body = b"\xef\xbb\xbf" + json.dumps({"item": item.pk, "position": 0}).encode()

    response = client.post(submit_url(study), data=body, content_type="application/json")

    assert response.status_code == 201


# --- identities ------------------------------------------------------------------------------


def identity_refusal(tmp_path, study, annotator: str) -> str:
    row = export_study(study)[0]
    good = {"item": row["item"], "annotator": "newcomer", "choice": row["gold"]}
    path = write_jsonl(tmp_path / "rows.jsonl", [good, {**good, "annotator": annotator}])
    return refusal(study, path)


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda: make_user("admin", staff=True), "is a staff account"),
        (lambda: get_user_model().objects.create_superuser("admin", password="pw-for-tests"), "is a staff account"),
        (lambda: make_annotator("admin", blocked=True), "is blocked from annotation"),
    ],
    ids=["staff", "superuser", "blocked-everywhere"],
)
def test_judgments_may_not_be_attributed_to_staff_or_blocked_accounts(tmp_path, make, reason):
    study = make_relic_proxy_study(1)
    make()

    message = identity_refusal(tmp_path, study, "admin")

    assert message.endswith(
        f":2: field 'annotator': 'admin' {reason}; imported judgments may only name annotator accounts"
    )
    assert not get_user_model().objects.filter(username="newcomer").exists()


def test_judgments_may_not_be_attributed_to_an_annotator_blocked_from_the_study(tmp_path):
    study = make_relic_proxy_study(1)
    StudyBlock.objects.create(study=study, annotator=make_annotator("ann"), reason="spam")

    assert "'ann' is blocked from this study" in identity_refusal(tmp_path, study, "ann")


def test_annotator_accounts_and_new_names_may_be_named(tmp_path):
    study = make_relic_proxy_study(1)
    make_annotator("ann")
    row = export_study(study)[0]
    rows = [{"item": row["item"], "annotator": name, "choice": row["gold"]} for name in ("ann", "newcomer")]

    call_command("import_judgments", str(study.pk), str(write_jsonl(tmp_path / "rows.jsonl", rows)))

    assert sorted(Judgment.objects.values_list("annotator__username", flat=True)) == ["ann", "newcomer"]


def test_submit_refuses_a_body_over_the_upload_limit_before_parsing_it(claimed, settings):
    client, study, item = claimed
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = json.dumps({"item": item.pk, "position": 0, "rationale": "x" * 1000})

    response = client.post(submit_url(study), data=body, content_type="application/json")

    assert response.status_code == 400
    assert not Judgment.objects.exists()
