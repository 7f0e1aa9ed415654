"""The number rule (ASCII digits) holds on the paths the importers' rule did not reach: every form
field and REST field that takes a number, and every hand-written digit check before an int().
Django's and DRF's IntegerField read '٣' as 3 and '1_0' as 10; str.isdigit() says yes to '٣'
and to the superscript '²', which int() then refuses with a ValueError (a traceback and a 500 on
a preference answer posted with position '²')."""

import pytest
from django import forms
from django.core.management import CommandError, call_command
from django.urls import get_resolver
from rest_framework import serializers

from annotation.models import Judgment, Study
from annotation.services import claim_next_item
from jobs.management.commands.run_platform import parse_concurrency
from retrieval.fields import AsciiFloatFormField, AsciiIntegerFormField
from retrieval.input_rules import is_digits
from tests.factories import api_client, make_annotator, make_preference_study, make_relic_proxy_study, make_user

PROJECT_APPS = {"annotation", "console", "evaluation", "integrations", "jobs", "judges", "outbound", "retrieval"}
NOT_DIGITS = ["٣", "²", "1_0", "１", "", " 1"]


def project_subclasses(base: type) -> list[type]:
    """Every subclass of `base` defined in the platform's apps, once the URLconf imported them."""
    get_resolver().url_patterns  # noqa: B018 - imports every view, form and serializer module
    found, stack = set(), [base]
    while stack:
        for subclass in stack.pop().__subclasses__():
            if subclass not in found:
                found.add(subclass)
                stack.append(subclass)
    return [cls for cls in found if cls.__module__.split(".")[0] in PROJECT_APPS]


def test_is_digits_means_ascii_digits_only():
    assert [is_digits(text) for text in ("0", "007", "123")] == [True, True, True]
    assert not any(is_digits(text) for text in NOT_DIGITS)


def test_every_number_field_on_every_form_reads_ascii_only():
    form_classes = project_subclasses(forms.BaseForm)
    assert len(form_classes) > 20
    lenient = [
        f"{form.__module__}.{form.__name__}.{name}"
        for form in form_classes
        for name, field in form.base_fields.items()
        if isinstance(field, forms.IntegerField | forms.FloatField)
        and not isinstance(field, AsciiIntegerFormField | AsciiFloatFormField)
    ]
    assert lenient == []


def test_every_writable_number_field_on_every_serializer_reads_ascii_only():
    serializer_classes = project_subclasses(serializers.BaseSerializer)
    assert len(serializer_classes) > 20
    lenient = []
    for serializer in serializer_classes:
        for name, field in serializer().fields.items():
            for number_field in (field, getattr(field, "child", None)):
                if type(number_field) in (serializers.IntegerField, serializers.FloatField) and not field.read_only:
                    lenient.append(f"{serializer.__module__}.{serializer.__name__}.{name}")
    assert lenient == []


@pytest.mark.parametrize("text", ["٣", "²", "1_0"])
def test_a_form_number_field_refuses_other_digits_with_its_own_words(text):
    field = AsciiIntegerFormField(min_value=1)
    with pytest.raises(forms.ValidationError, match="Enter a whole number"):
        field.clean(text)
    assert field.clean(" 12 ") == 12
    with pytest.raises(forms.ValidationError, match="Enter a number"):
        AsciiFloatFormField().clean(text)


@pytest.mark.django_db
@pytest.mark.parametrize("text", ["²", "٣"])
def test_a_preference_answer_with_other_digits_is_a_400_and_stores_nothing(text):
    study = make_preference_study()
    annotator = make_annotator()
    client = api_client(annotator)
    item = client.get(f"/api/annotate/{study.pk}/next/").json()["item"]
    for body in ({"item": item, "position": text}, {"item": item, "label": {"ranks": [text, "1"]}}):
        response = client.post(f"/api/annotate/{study.pk}/submit/", body, format="json")
        assert response.status_code == 400, response.content
    assert not Judgment.objects.filter(item__study=study).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("text", ["²", "٣", str(2**70)])
def test_more_context_for_a_candidate_named_in_other_digits_is_a_400(text):
    study = make_relic_proxy_study(2)
    Study.objects.filter(pk=study.pk).update(more_context=True)
    annotator = make_annotator()
    claim_next_item(study, annotator)
    response = api_client(annotator).get(f"/api/annotate/{study.pk}/context/", {"candidate": text})
    assert response.status_code == 400


@pytest.mark.django_db
@pytest.mark.parametrize("text", ["²", "٣"])
def test_gold_items_named_in_other_digits_are_a_400(text):
    study = make_relic_proxy_study(2)
    staff = make_user(staff=True)
    response = api_client(staff).post(
        f"/api/studies/{study.pk}/designate/", {"role": "gold", "expected": {text: 0}}, format="json"
    )
    assert response.status_code == 400, response.content


@pytest.mark.django_db
@pytest.mark.parametrize("text", ["gold=²", "gold=٣"])
def test_the_quality_command_refuses_a_count_in_other_digits_in_one_line(text):
    study = make_relic_proxy_study(2)
    with pytest.raises(CommandError, match="field 'designate'"):
        call_command("study_quality", str(study.pk), "--designate", text)


@pytest.mark.parametrize("text", ["cpu=²", "cpu=٣"])
def test_run_platform_refuses_a_concurrency_in_other_digits(text):
    with pytest.raises(CommandError, match="--concurrency"):
        parse_concurrency(text)
