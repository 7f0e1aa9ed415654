"""Choice rates by the position a candidate was shown at, and a test of no position effect.

Every judgment records the order its annotator saw the item's candidates in (`shown_order`,
annotation.presentation); a judgment without one (imported, or given before orders were
recorded) was shown the item's own order when the study keeps one order per item, and is left
out ("order_unknown") when the study shuffles per annotator. Agreement and accuracy never read
these positions: they compare candidates (item positions), so two annotators who chose the same
passage agree wherever each of them saw it.

Proxy items (choose one of k): under no position effect a judgment is equally likely to land on
each of the k places it showed, so position p expects the sum over judgments of 1/k_j (k/n each
when every item shows k). That is the null whenever the gold's shown position is uniform, which
the study's design ensures: item positions put the gold at every position equally often, and a
per-annotator shuffle is drawn without looking at the gold; `gold_shown` reports where it was
shown so a reader can check. The test is Pearson's chi-square goodness of fit of the choices per
position against those expectations (scipy.stats.chisquare, df = positions - 1).

Multi-select items (select any of the paragraphs): a position has a selection rate (selected /
shown there); no position effect means one rate for all positions, tested by Pearson's
chi-square test of independence of the 2 x positions table selected / not selected
(scipy.stats.chi2_contingency, without Yates' correction, df = positions - 1).

Both tests treat judgments as independent; judgments by one annotator are not, so with few
annotators a small p-value says more about those annotators than about a population. Single-
passage label items show nothing to order: no section.
"""

from __future__ import annotations

from collections.abc import Sequence

from scipy import stats

from annotation.models import Study
from evaluation.agreement import finite_or_none
from evaluation.selectors import ShownAnswer

PROXY_TEST = "chi-square goodness of fit: choices per position shown against equal chances for the positions shown"
SELECTION_TEST = "chi-square test of independence: selected or not by position shown"


def answer_order(study: Study, answer: ShownAnswer) -> list[int] | None:
    """The order this answer's annotator saw, or None when it cannot be known."""
    order = answer.shown_order
    if order is not None and sorted(order) == list(range(answer.candidates)):
        return order
    if order is None and study.candidate_order == Study.CandidateOrder.ITEM:
        return list(range(answer.candidates))
    return None


def proxy_position_effect(study: Study, answers: Sequence[ShownAnswer]) -> dict:
    """Choices by position shown for a proxy study: counts, rates, expected counts under no
    position effect, where the gold was shown, and the goodness-of-fit test."""
    known, unknown = _known(study, answers)
    places = max((len(order) for order, _ in known), default=0)
    chosen, shown, expected, gold_shown = [0] * places, [0] * places, [0.0] * places, [0] * places
    for order, answer in known:
        for place in range(len(order)):
            shown[place] += 1
            expected[place] += 1 / len(order)
        chosen[order.index(answer.chosen[0])] += 1
        if answer.gold is not None:
            gold_shown[order.index(answer.gold)] += 1
    kept = [place for place in range(places) if expected[place] > 0]
    test = None
    if len(known) and len(kept) > 1:
        result = stats.chisquare([chosen[place] for place in kept], [expected[place] for place in kept])
        test = (float(result.statistic), len(kept) - 1, float(result.pvalue))
    return {
        "candidate_order": study.candidate_order,
        "test": PROXY_TEST,
        "judgments": len(known),
        "order_unknown": unknown,
        "positions": [
            {
                "position": place,
                "shown": shown[place],
                "chosen": chosen[place],
                "rate": chosen[place] / shown[place] if shown[place] else None,
                "expected": expected[place],
                "gold_shown": gold_shown[place],
            }
            for place in range(places)
        ],
        **_test_fields(test),
    }


def selection_position_effect(study: Study, answers: Sequence[ShownAnswer]) -> dict:
    """Selections by position shown for a multi-select study: per position how often it was
    shown and selected, the rate, and the test of one rate for all positions."""
    known, unknown = _known(study, answers)
    places = max((len(order) for order, _ in known), default=0)
    shown, selected = [0] * places, [0] * places
    for order, answer in known:
        for place in range(len(order)):
            shown[place] += 1
        for position in answer.chosen:
            selected[order.index(position)] += 1
    kept = [place for place in range(places) if shown[place]]
    picked = [selected[place] for place in kept]
    passed = [shown[place] - selected[place] for place in kept]
    test = None
    if len(kept) > 1 and sum(picked) and sum(passed):
        result = stats.chi2_contingency([picked, passed], correction=False)
        test = (float(result.statistic), int(result.dof), float(result.pvalue))
    return {
        "candidate_order": study.candidate_order,
        "test": SELECTION_TEST,
        "judgments": len(known),
        "order_unknown": unknown,
        "positions": [
            {
                "position": place,
                "shown": shown[place],
                "selected": selected[place],
                "rate": selected[place] / shown[place] if shown[place] else None,
            }
            for place in range(places)
        ],
        **_test_fields(test),
    }


def _known(study: Study, answers: Sequence[ShownAnswer]) -> tuple[list[tuple[list[int], ShownAnswer]], int]:
    """The answers whose order is known, each with it, and how many are not."""
    known = []
    for answer in answers:
        order = answer_order(study, answer)
        if order is not None and set(answer.chosen) <= set(order):
            known.append((order, answer))
    return known, len(answers) - len(known)


def _test_fields(test: tuple[float, int, float] | None) -> dict:
    if test is None:
        return {"chi_square": None, "df": None, "p_value": None}
    statistic, df, p_value = test
    return {"chi_square": finite_or_none(statistic), "df": df, "p_value": finite_or_none(p_value)}
