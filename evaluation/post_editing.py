"""The post-editing condition in a study report (the `post_editing` key of a study that has it,
annotation.post_editing): its judgments split by whether a proposal was shown, and for each
condition
- `judgments`, `items`, `annotators`;
- `kept` (shown only): how many answers are the proposal, and their share;
- `agreement_with_others`: for each judgment, the share of the other counted judgments of its
  item (whatever their condition) that give the same answer, averaged over the judgments that
  have another to compare with;
- `krippendorff_alpha`: among the condition's own judgments (raters = annotators, units =
  items), nominal, and on a scale ordinal and interval too;
- `gold`: the judgments whose item has a known answer (a proxy item's gold candidate, a hidden
  gold item's expected label), and the share that give it.
The judgments are the counted ones (annotation.selectors.counted_judgments: work items, not
voided, blocked annotators' excluded when staff said so) and those of hidden gold items (not
voided): proposals are shown on both. Answers compare as given: a proxy item's chosen display
position, a label item's label.
"""

from __future__ import annotations

from collections import defaultdict

from annotation.label_schema import study_schema
from annotation.models import Judgment, Study
from annotation.post_editing import CONDITION_KEY, has_post_editing
from annotation.selectors import counted_judgments, gold_judgments
from evaluation import label_agreement
from evaluation.agreement import finite_or_none

CONDITIONS = (("shown", True), ("not_shown", False))


def _answer(study: Study, judgment: Judgment):
    return judgment.choice.position if study.kind == Study.Kind.PROXY else judgment.label


def _known(study: Study, judgment: Judgment, golds: dict[int, int]):
    if study.kind == Study.Kind.PROXY:
        return golds.get(judgment.item_id)
    expected = judgment.item.expected_label
    return None if isinstance(expected, list) else expected


def post_editing_report(study: Study) -> dict:
    """{"post_editing": ...} for a study with the condition (see the module docstring), else {}."""
    if not has_post_editing(study):
        return {}
    judgments = [*counted_judgments(study), *gold_judgments(study)]
    golds = dict(
        study.items.filter(candidates__is_gold=True).values_list("pk", "candidates__position")
        if study.kind == Study.Kind.PROXY
        else []
    )
    by_item: dict[int, list[tuple[str, object]]] = defaultdict(list)
    for judgment in judgments:
        by_item[judgment.item_id].append((judgment.annotator.username, _answer(study, judgment)))
    levels = (
        ["nominal"]
        if study.kind == Study.Kind.PROXY or len(study_schema(study)["values"]) <= 2
        else [
            "nominal",
            "ordinal",
            "interval",
        ]
    )
    sections = {}
    for name, shown in CONDITIONS:
        mine = [judgment for judgment in judgments if judgment.proposal_shown == shown]
        shares = []
        for judgment in mine:
            others = [answer for who, answer in by_item[judgment.item_id] if who != judgment.annotator.username]
            if others:
                shares.append(sum(answer == _answer(study, judgment) for answer in others) / len(others))
        known = [(judgment, _known(study, judgment, golds)) for judgment in mine]
        known = [(judgment, expected) for judgment, expected in known if expected is not None]
        kept = sum(bool(judgment.proposal_kept) for judgment in mine)
        triples = [(judgment.annotator.username, judgment.item_id, _answer(study, judgment)) for judgment in mine]
        sections[name] = {
            "judgments": len(mine),
            "items": len({judgment.item_id for judgment in mine}),
            "annotators": len({judgment.annotator_id for judgment in mine}),
            "kept": {"judgments": kept, "share": kept / len(mine) if mine else None} if shown else None,
            "agreement_with_others": {
                "judgments": len(shares),
                "share": sum(shares) / len(shares) if shares else None,
            },
            "krippendorff_alpha": _alphas(triples, levels),
            "gold": {
                "judgments": len(known),
                "accuracy": sum(_answer(study, j) == expected for j, expected in known) / len(known) if known else None,
            },
        }
    return {"post_editing": {"condition": study.parameters[CONDITION_KEY], "conditions": sections}}


def _alphas(triples: list, levels: list[str]) -> dict:
    answered = [triple for triple in triples if triple[2] is not None]
    if not answered:
        return dict.fromkeys(levels)
    matrix = label_agreement.reliability_matrix(answered).values
    return {level: finite_or_none(label_agreement.krippendorff_alpha(matrix, level)) for level in levels}
