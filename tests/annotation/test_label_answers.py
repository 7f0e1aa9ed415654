"""validate_answer: every answer (web, API, qualification, import) is checked against the study's
kind and label schema, and a bad one is refused naming the field; is_correct compares an answer
with the item's known answer."""

import pytest

from annotation.models import Item, Study
from annotation.services import Answer, is_correct, validate_answer, validate_expected
from retrieval.errors import InputError
from tests.factories import add_label_item, add_label_judgment, make_annotator, make_label_study, make_relic_proxy_study

pytestmark = pytest.mark.django_db

RUBRIC = [{"name": "specificity", "values": [0, 1]}, {"name": "quality", "values": [0, 1, 2]}]


def label_item(label_schema=None, *, kind=Study.Kind.RELEVANCE, candidates=1, **item_fields):
    study = make_label_study(kind=kind, label_schema=label_schema)
    return study, add_label_item(study, candidates=candidates, **item_fields)


def refused(study, item, **answer) -> InputError:
    with pytest.raises(InputError) as error:
        validate_answer(study, item, **answer)
    return error.value


# --- labels ----------------------------------------------------------------------------------


def test_a_label_from_the_scale_is_accepted_as_a_number_or_as_form_text():
    study, item = label_item({"scale": "graded-0-3"})
    assert validate_answer(study, item, label=2) == Answer(label=2)
    assert validate_answer(study, item, label="3").label == 3


@pytest.mark.parametrize("label", [None, 4, -1, "high", 1.0, True, [1]])
def test_a_label_outside_the_values_is_refused(label):
    study, item = label_item({"scale": "graded-0-3"})
    assert refused(study, item, label=label).field == "label"


def test_values_narrower_than_the_scale_are_enforced():
    study, item = label_item({"scale": "0-10", "values": [0, 5, 10]})
    assert validate_answer(study, item, label=5).label == 5
    assert refused(study, item, label=4).field == "label"


def test_a_label_study_takes_no_chosen_candidate():
    study, item = label_item()
    assert refused(study, item, label=1, position=0).field == "position"


# --- spans -----------------------------------------------------------------------------------


def test_spans_on_the_passage_are_sorted_deduplicated_and_take_the_schemas_target():
    study, item = label_item({"spans": "passage"})
    text = item.candidates.get().passage.text  # "passage N"
    answer = validate_answer(
        study,
        item,
        label=1,
        spans=[{"start": 8, "end": len(text)}, {"target": "passage", "start": 0, "end": 7}, {"start": 0, "end": 7}],
    )
    assert answer.spans == [
        {"target": "passage", "start": 0, "end": 7},
        {"target": "passage", "start": 8, "end": len(text)},
    ]


def test_spans_on_the_query_count_characters_of_the_query_as_shown():
    study, item = label_item({"spans": "query"})
    text = item.query.text
    answer = validate_answer(study, item, label=0, spans=[{"start": 0, "end": len(text)}])
    assert answer.spans == [{"target": "query", "start": 0, "end": len(text)}]
    assert refused(study, item, label=0, spans=[{"start": 0, "end": len(text) + 1}]).field == "spans[0]"


@pytest.mark.parametrize(
    ("spans", "field"),
    [
        ({"start": 0, "end": 2}, "spans"),
        ([{"start": 3, "end": 3}], "spans[0]"),  # empty
        ([{"start": 5, "end": 2}], "spans[0]"),  # reversed
        ([{"start": -1, "end": 2}], "spans[0]"),
        ([{"start": 0, "end": 999}], "spans[0]"),  # past the end of the text
        ([{"start": 0}], "spans[0]"),
        ([{"start": 0, "end": 2, "note": "x"}], "spans[0]"),
        ([{"start": "a", "end": 2}], "spans[0].start"),
        ([{"target": "query", "start": 0, "end": 2}], "spans[0].target"),
    ],
)
def test_a_bad_span_is_refused_naming_it(spans, field):
    study, item = label_item({"spans": "passage"})
    assert refused(study, item, label=1, spans=spans).field == field


def test_required_spans_must_be_given_and_unasked_ones_are_refused():
    study, item = label_item({"spans": "passage", "spans_required": True})
    assert refused(study, item, label=1).field == "spans"
    study, item = label_item()
    assert refused(study, item, label=1, spans=[{"start": 0, "end": 2}]).field == "spans"


# --- rubric and rationale ----------------------------------------------------------------------


def test_every_rubric_field_is_answered_with_one_of_its_values():
    study, item = label_item({"rubric": RUBRIC})
    answer = validate_answer(study, item, label=1, rubric={"specificity": 1, "quality": "2"})
    assert answer.rubric == {"specificity": 1, "quality": 2}


@pytest.mark.parametrize(
    ("rubric", "field"),
    [
        ({"specificity": 1}, "rubric.quality"),  # missing
        ({"specificity": 1, "quality": 3}, "rubric.quality"),  # outside its values
        ({"specificity": 1, "quality": 0, "novelty": 1}, "rubric.novelty"),  # unknown
        ([1, 2], "rubric"),
    ],
)
def test_a_bad_rubric_is_refused_naming_the_field(rubric, field):
    study, item = label_item({"rubric": RUBRIC})
    assert refused(study, item, label=1, rubric=rubric).field == field


def test_a_study_without_a_rubric_refuses_rubric_answers():
    study, item = label_item()
    assert refused(study, item, label=1, rubric={"quality": 1}).field == "rubric.quality"


def test_a_required_rationale_must_be_written_and_is_stored_trimmed():
    study, item = label_item({"rationale": "required"})
    assert refused(study, item, label=1).field == "rationale"
    assert refused(study, item, label=1, rationale="   ").field == "rationale"
    assert validate_answer(study, item, label=1, rationale=" The plot matches. ").rationale == "The plot matches."


def test_an_optional_rationale_may_be_left_out_and_none_is_refused_when_unasked():
    study, item = label_item({"rationale": "optional"})
    assert validate_answer(study, item, label=0).rationale == ""
    study, item = label_item()
    assert refused(study, item, label=0, rationale="because").field == "rationale"


# --- multi-select ------------------------------------------------------------------------------


def test_the_pilot_stores_the_selected_positions_sorted_and_no_label():
    study, item = label_item({"multi_select": True}, kind=Study.Kind.QUOTABILITY, candidates=5)
    assert validate_answer(study, item, selections=[3, "0"]) == Answer(selections=[0, 3])
    assert validate_answer(study, item, selections=[]).selections == []  # nothing quotable


@pytest.mark.parametrize(
    ("answer", "field"),
    [
        ({}, "selections"),
        ({"selections": 2}, "selections"),
        ({"selections": [1, 1]}, "selections"),  # duplicate
        ({"selections": [5]}, "selections"),  # no such candidate
        ({"selections": [-1]}, "selections"),
        ({"selections": [0], "label": 1}, "label"),
    ],
)
def test_bad_selections_are_refused(answer, field):
    study, item = label_item({"multi_select": True}, kind=Study.Kind.QUOTABILITY, candidates=5)
    assert refused(study, item, **answer).field == field


def test_a_single_label_study_refuses_selections():
    study, item = label_item()
    assert refused(study, item, label=1, selections=[0]).field == "selections"


# --- proxy ------------------------------------------------------------------------------------


def test_a_proxy_answer_is_one_candidate_by_object_or_position():
    study = make_relic_proxy_study(1)
    item = study.items.get()
    second = item.candidates.get(position=1)
    assert validate_answer(study, item, position=1).choice == second
    assert validate_answer(study, item, candidate=second).choice == second
    assert refused(study, item).field == "position"
    assert refused(study, item, position=9).field == "position"
    assert refused(study, item, candidate=second, position=0).field == "candidate"
    assert refused(study, item, position=0, label=1).field == "label"
    assert refused(study, item, position=0, rationale="gut feeling").field == "rationale"


# --- known answers ------------------------------------------------------------------------------


def test_a_proxy_answer_is_correct_when_it_chose_the_gold():
    study = make_relic_proxy_study(1)
    item = study.items.get()
    gold = item.candidates.get(is_gold=True)
    other = item.candidates.exclude(is_gold=True).first()
    assert is_correct(item, Answer(choice=gold)) is True
    assert is_correct(item, Answer(choice=other)) is False


def test_a_label_answer_is_correct_when_it_equals_the_expected_label():
    study, item = label_item({"scale": "graded-0-2"}, role=Item.Role.GOLD, expected_label=2)
    assert is_correct(item, validate_answer(study, item, label=2)) is True
    assert is_correct(item, validate_answer(study, item, label=1)) is False


def test_a_selection_is_correct_when_it_is_the_expected_set():
    study, item = label_item(
        {"multi_select": True},
        kind=Study.Kind.QUOTABILITY,
        candidates=4,
        role=Item.Role.QUALIFICATION,
        expected_label=[0, 2],
    )
    assert is_correct(item, validate_answer(study, item, selections=[2, 0])) is True
    assert is_correct(item, validate_answer(study, item, selections=[0])) is False


def test_an_item_without_a_known_answer_says_nothing():
    study, item = label_item()
    assert is_correct(item, validate_answer(study, item, label=1)) is None


def test_stored_judgments_are_compared_like_answers():
    _study, item = label_item(role=Item.Role.GOLD, expected_label=1)
    assert is_correct(item, add_label_judgment(item, make_annotator(), 1)) is True


def test_expected_labels_are_validated_like_answers():
    study, item = label_item({"scale": "graded-0-2"})
    assert validate_expected(study, item, "2") == 2
    with pytest.raises(InputError) as error:
        validate_expected(study, item, 3)
    assert error.value.field == "expected_label"
    study, item = label_item({"multi_select": True}, kind=Study.Kind.QUOTABILITY, candidates=3)
    assert validate_expected(study, item, [2, 0]) == [0, 2]
