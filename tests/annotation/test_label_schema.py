"""The label schema of relevance and quotability studies: defaults per kind, every key filled in,
and bad schemas refused with the offending key named."""

import pytest

from annotation.models import Study
from annotation.services import default_schema, validate_schema
from retrieval.errors import InputError


def test_relevance_defaults_to_a_binary_scale_with_named_values():
    schema = default_schema(Study.Kind.RELEVANCE)
    assert schema == {
        "scale": "binary",
        "values": [0, 1],
        "value_labels": {"0": "Not relevant", "1": "Relevant"},
        "question": "Is this passage relevant to the query?",
        "spans": None,
        "spans_required": False,
        "rubric": [],
        "rationale": "none",
        "multi_select": False,
    }


def test_quotability_defaults_to_the_papers_yes_no_question():
    schema = default_schema(Study.Kind.QUOTABILITY)
    assert schema["question"] == (
        "Does this paragraph contain an excerpt that would be appropriate to quote in the next sentence?"
    )
    assert schema["values"] == [0, 1] and schema["value_labels"] == {"0": "No", "1": "Yes"}


def test_the_pilot_asks_which_paragraphs_are_quotable():
    schema = validate_schema({"multi_select": True}, kind=Study.Kind.QUOTABILITY)
    assert schema["multi_select"] is True and schema["question"].startswith("Which of these paragraphs")


def test_a_proxy_study_has_no_schema():
    assert default_schema(Study.Kind.PROXY) == {}


@pytest.mark.parametrize(
    ("scale", "values"),
    [("binary", [0, 1]), ("graded-0-2", [0, 1, 2]), ("graded-0-3", [0, 1, 2, 3]), ("0-10", list(range(11)))],
)
def test_each_scale_brings_its_values(scale, values):
    schema = validate_schema({"scale": scale})
    assert schema["values"] == values
    assert set(schema["value_labels"]) == {str(v) for v in values}


def test_unnamed_values_show_their_number_and_named_ones_their_name():
    schema = validate_schema({"scale": "0-10", "value_labels": {"0": "useless", "10": "perfect"}})
    assert schema["value_labels"]["0"] == "useless" and schema["value_labels"]["10"] == "perfect"
    assert schema["value_labels"]["5"] == "5"


def test_a_full_schema_with_spans_rubric_and_rationale_is_kept():
    rubric = [
        {"name": "specificity", "values": [0, 1], "labels": {"0": "broad", "1": "specific"}},
        {"name": "quality", "values": [0, 1, 2]},
    ]
    schema = validate_schema(
        {
            "scale": "graded-0-2",
            "spans": "query",
            "spans_required": True,
            "rubric": rubric,
            "rationale": "optional",
            "question": "  Does the passage match the plot?  ",
        }
    )
    assert schema["question"] == "Does the passage match the plot?"
    assert (schema["spans"], schema["spans_required"], schema["rationale"]) == ("query", True, "optional")
    assert schema["rubric"] == [
        {"name": "specificity", "values": [0, 1], "labels": {"0": "broad", "1": "specific"}},
        {"name": "quality", "values": [0, 1, 2], "labels": {"0": "0", "1": "1", "2": "2"}},
    ]


def test_values_may_be_a_subset_of_the_scale():
    assert validate_schema({"scale": "0-10", "values": [0, 5, 10]})["values"] == [0, 5, 10]


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        ([0, 1], "label_schema"),
        ({"scales": "binary"}, "label_schema.scales"),
        ({"scale": "graded-0-5"}, "label_schema.scale"),
        ({"values": [1]}, "label_schema.values"),
        ({"values": [1, 0]}, "label_schema.values"),
        ({"values": [0, 0, 1]}, "label_schema.values"),
        ({"values": [0, True]}, "label_schema.values"),
        ({"values": [0, 2]}, "label_schema.values"),  # not on the binary scale
        ({"value_labels": {"7": "seven"}}, "label_schema.value_labels"),
        ({"value_labels": {"1": ""}}, "label_schema.value_labels"),
        ({"question": ""}, "label_schema.question"),
        ({"spans": "context"}, "label_schema.spans"),
        ({"spans_required": True}, "label_schema.spans_required"),
        ({"spans": "query", "spans_required": "yes"}, "label_schema.spans_required"),
        ({"rationale": "sometimes"}, "label_schema.rationale"),
        ({"multi_select": 1}, "label_schema.multi_select"),
        ({"multi_select": True, "spans": "passage"}, "label_schema.spans"),
        ({"rubric": {"name": "x"}}, "label_schema.rubric"),
        ({"rubric": ["quality"]}, "label_schema.rubric[0]"),
        ({"rubric": [{"name": "has space", "values": [0, 1]}]}, "label_schema.rubric[0].name"),
        ({"rubric": [{"name": "q", "values": [0]}]}, "label_schema.rubric[0].values"),
        ({"rubric": [{"name": "q", "values": [0, 1], "labels": {"2": "two"}}]}, "label_schema.rubric[0].labels"),
        ({"rubric": [{"name": "q", "values": [0, 1], "weight": 2}]}, "label_schema.rubric[0].weight"),
        (
            {"rubric": [{"name": "q", "values": [0, 1]}, {"name": "q", "values": [0, 1, 2]}]},
            "label_schema.rubric[1].name",
        ),
    ],
)
def test_a_bad_schema_names_the_offending_field(schema, field):
    with pytest.raises(InputError) as error:
        validate_schema(schema)
    assert error.value.field == field
    assert f"field '{field}'" in str(error.value)


def test_a_normalised_schema_validates_to_itself():
    schema = validate_schema({"scale": "graded-0-3", "spans": "passage", "rubric": [{"name": "q", "values": [0, 1]}]})
    assert validate_schema(schema) == schema
