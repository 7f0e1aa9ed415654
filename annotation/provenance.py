"""How much an item's annotators agree, and where an item's label comes from.

Agreement (what the adjudication queue orders by, lowest first): the mean, over every pair of
the item's counted judgments, of how far the pair agrees: 1 when both gave the same answer,
otherwise
- 0 for categories: a proxy item's chosen position, a yes/no (two-value) scale;
- 1 - |a - b| / (largest - smallest scale value) on a graded or 0-10 scale, so neighbouring
  grades disagree less than opposite ends;
- the Jaccard index of the selected paragraphs in a multi-select item (two empty selections
  agree).
An item needs two counted judgments to have one; 1 means unanimous. For categories this is
Fleiss' per-item agreement P_i. Spans, rubric fields and rationales do not enter it.

Label sources (the `label_source` field of every export; `LABEL_SOURCES`):
- `adjudicated`: an adjudicator's decision is the label;
- `unanimous`: two or more counted judgments gave the label, all the same;
- `single`: one counted judgment gave it;
- `aggregated`: the judgments differ and the label is their aggregate, by `label_method`
  (majority, mean, median, dawid-skene, mace or glad: what the export aggregated with). A
  competence model that goes against a unanimous (or single) answer aggregated too;
- `sent_back`: an adjudicator sent the item back for a fresh round and it has no counted
  judgment since: no label yet;
- `unjudged`: no counted judgment and never sent back: no label.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .label_schema import study_schema
from .models import Adjudication, Rework, Study
from .selectors import counted_judgments

ADJUDICATED, UNANIMOUS, SINGLE, AGGREGATED, SENT_BACK, UNJUDGED = (
    "adjudicated",
    "unanimous",
    "single",
    "aggregated",
    "sent_back",
    "unjudged",
)
LABEL_SOURCES = (ADJUDICATED, UNANIMOUS, SINGLE, AGGREGATED, SENT_BACK, UNJUDGED)
# The method an item's label is aggregated with where an export names none (judgments, datasets,
# the proxy report): the majority vote, a tie going to the lowest answer, as `aggregate_labels
# --method majority` does.
DEFAULT_METHOD = "majority"


# --- agreement ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnswerScale:
    """How two answers of one study compare: `kind` is "categories", "scale" or "sets"; `span`
    is a scale's largest minus smallest value."""

    kind: str
    span: int = 1

    def pair(self, a, b) -> float:
        """How far two answers agree, in [0, 1]."""
        if a == b:
            return 1.0
        if self.kind == "scale":
            return 1.0 - abs(a - b) / self.span
        if self.kind == "sets":
            union = set(a) | set(b)
            return len(set(a) & set(b)) / len(union)
        return 0.0


def answer_scale(study: Study) -> AnswerScale:
    if study.kind == Study.Kind.PROXY:
        return AnswerScale("categories")
    schema = study_schema(study)
    if schema["multi_select"]:
        return AnswerScale("sets")
    values = schema["values"]
    return AnswerScale("scale", max(values) - min(values)) if len(values) > 2 else AnswerScale("categories")


def agreement(counts: Mapping[Hashable, int], scale: AnswerScale) -> float | None:
    """The mean pairwise agreement of answers given `counts` times each (answer -> count);
    None with fewer than two answers. Computed from the counts: sum over answers a, b of
    n_a (n_b - [a = b]) w(a, b), over n (n - 1)."""
    n = sum(counts.values())
    if n < 2:
        return None
    total = sum(
        count * (other_count - (a == b)) * scale.pair(a, b)
        for a, count in counts.items()
        for b, other_count in counts.items()
    )
    return total / (n * (n - 1))


def answer_key(study: Study, *, position=None, label=None, selections=None) -> Hashable:
    """What two answers must share to be the same: the chosen position (proxy), the label, or
    the sorted selected positions (multi-select, as a tuple)."""
    if study.kind == Study.Kind.PROXY:
        return position
    if study_schema(study)["multi_select"]:
        return tuple(sorted(selections or ()))
    return label


def answer_column(study: Study) -> str:
    """The judgment column an answer key is read from."""
    if study.kind == Study.Kind.PROXY:
        return "choice__position"
    return "selections" if study_schema(study)["multi_select"] else "label"


def as_key(value) -> Hashable:
    """A value of `answer_column` as an answer key (JSON lists become sorted tuples)."""
    return tuple(sorted(value)) if isinstance(value, list) else value


# --- label sources -----------------------------------------------------------------------------


def label_source(answers: Sequence[Hashable], label, *, adjudicated: bool = False, sent_back: bool = False) -> str:
    """Where a label comes from (see the module docstring), given the counted answers it was
    made from and the label itself."""
    if adjudicated:
        return ADJUDICATED
    if not answers:
        return SENT_BACK if sent_back else UNJUDGED
    if len(set(answers)) == 1 and label == answers[0]:
        return SINGLE if len(answers) == 1 else UNANIMOUS
    return AGGREGATED


def label_method(source: str, method: str) -> str | None:
    """The method an export names beside a label: its own for aggregated labels, else none."""
    return method if source == AGGREGATED else None


def majority_answer(answers: Sequence[Hashable], multi_select: bool = False):
    """The majority vote of one item's answers, ties to the lowest answer. A multi-select item
    votes per paragraph (selected by more than half), as a unit-level majority does."""
    if multi_select:
        selected = Counter(position for answer in answers for position in answer)
        return tuple(sorted(position for position, votes in selected.items() if 2 * votes > len(answers)))
    counts = Counter(answers)
    best = max(counts.values())
    return min(answer for answer, count in counts.items() if count == best)


@dataclass(frozen=True)
class ItemLabel:
    """An item's label and where it comes from. `label` is a position (proxy), a scale value,
    or a list of positions (multi-select); None when there is none."""

    label: object
    source: str
    method: str | None
    reworks: int  # times the item was sent back

    def fields(self) -> dict:
        return {
            "item_label": list(self.label) if isinstance(self.label, tuple) else self.label,
            "label_source": self.source,
            "label_method": self.method,
            "reworks": self.reworks,
        }


def adjudicated_keys(study: Study) -> dict[int, Hashable]:
    """item id -> the decided answer, as an answer key."""
    rows = Adjudication.objects.filter(item__study=study).values_list(
        "item_id", "choice__position", "label", "selections"
    )
    return {
        item_id: answer_key(study, position=position, label=label, selections=selections)
        for item_id, position, label, selections in rows
    }


def rework_counts(study: Study) -> dict[int, int]:
    """item id -> how many times it was sent back."""
    return Counter(Rework.objects.filter(item__study=study).values_list("item_id", flat=True))


def counted_answers(study: Study) -> dict[int, list[Hashable]]:
    """item id -> the answer keys of its counted judgments, read as one column (a chosen
    position is its own key: only JSON answers go through as_key, a call per judgment)."""
    answers: dict[int, list[Hashable]] = defaultdict(list)
    rows = counted_judgments(study).order_by().values_list("item_id", answer_column(study))
    for item_id, value in rows.iterator(10_000):
        answers[item_id].append(value)
    if study.kind != Study.Kind.PROXY:
        for values in answers.values():
            values[:] = map(as_key, values)
    return answers


def item_labels(study: Study, item_ids: Iterable[int]) -> dict[int, ItemLabel]:
    """Each work item's label with its provenance, the majority vote aggregating (ties to the
    lowest answer) where the judgments differ: what the judgment and dataset exports write
    beside every row. Items of other roles are not labelled (their answers are known), nor are a
    preference study's (an answer there orders a pair: its scores come from every answer at
    once, evaluation.preference_report, not from one label per item)."""
    if study.kind == Study.Kind.PREFERENCE:
        return {}
    multi_select = study.kind != Study.Kind.PROXY and study_schema(study)["multi_select"]
    answers, decided, reworks = counted_answers(study), adjudicated_keys(study), rework_counts(study)
    labels = {}
    for item_id in item_ids:
        given = answers.get(item_id, [])
        majority = majority_answer(given, multi_select) if given else None
        label = decided.get(item_id, majority)
        source = label_source(given, label, adjudicated=item_id in decided, sent_back=item_id in reworks)
        labels[item_id] = ItemLabel(label, source, label_method(source, DEFAULT_METHOD), reworks.get(item_id, 0))
    return labels
