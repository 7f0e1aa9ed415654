"""The measures a run is scored by: their names (ir-measures', trec_eval's as aliases, and the
project's own) and their per-query values from plain numbers, as trec_eval computes them.

One query is a `Ranking`: the query's judgments (passage -> relevance, every judged passage,
non-relevant ones included), the passages the run returned in rank order, and, where the run
stored them, the exact ranks of its relevant passages over the whole candidate set (a built-in
run ranks every candidate but stores `depth` hits). Measures that only look at where the
relevant passages are (P, R, AP, nDCG, RR, Success, Rprec, IPrec) read those exact ranks when
they are given; measures that weigh judged non-relevant or unjudged passages (Judged, Bpref,
infAP, the Set measures and every `judged_only=True` variant) read the returned passages only,
as trec_eval reads a run file.

Definitions follow trec_eval 9 (through pytrec_eval, which ir-measures calls) and ir-measures'
own Judged, the test oracles (tests/retrieval/test_measures.py):
- relevant: relevance >= the level (`rel`, default 1); judged non-relevant: 0 <= relevance <
  level; a negative relevance is "pooled but not judged" (infAP's sample), which Bpref skips and
  `judged_only` drops. Unjudged passages are not relevant.
- P@k divides by k; R@k, AP, AP@k and Rprec by the number of relevant passages (0 when there is
  none); nDCG's gain is the relevance (negative: 0), discount log2(rank + 1), the ideal ranking
  orders every judged relevance; RR@k is 1 / the first relevant rank within k.
- Judged@k (ir-measures): the share of the top min(k, returned) passages that have a judgment of
  any value; without a cutoff, of all returned passages; 0 when nothing was returned.
- Bpref: for each relevant passage returned, 1 - min(n, R) / min(R, N), n the judged
  non-relevant passages above it, R the relevant and N the judged non-relevant passages; over R.
- infAP (Yilmaz & Aslam 2006, trec_eval's estimate): expected precision at each relevant
  passage from the judged ones above it, unpooled passages counting as non-relevant.
- SetF(beta=b): (1 + b) P R / (b P + R) over the returned set, trec_eval's weighting (b, not b²).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate

from .errors import InputError
from .input_rules import is_digits

INFAP_EPSILON = 0.00001

# Our stems, by the ir-measures name of the measure.
KEY_STEMS = {
    "P": "p",
    "R": "recall",
    "AP": "map",
    "nDCG": "ndcg",
    "RR": "mrr",
    "Success": "success",
    "Judged": "judged",
    "Rprec": "rprec",
    "Bpref": "bpref",
    "infAP": "infap",
    "IPrec": "iprec",
    "SetP": "setp",
    "SetR": "setr",
    "SetF": "setf",
    "N-RODCG": "n_rodcg",
    "mean_rank": "mean_rank",
}
# Every spelling accepted before the parameters and cutoff (compared lower-case) -> ir-measures name.
SPELLINGS = {
    **{name.lower(): name for name in KEY_STEMS},
    **{stem: name for name, stem in KEY_STEMS.items()},
    "precision": "P",
    "mrr": "RR",
    "n_rodcg": "N-RODCG",
    "meanrank": "mean_rank",
}
# trec_eval's names, with the cutoff or level after an underscore where they take one.
TREC_EVAL_NAMES = {
    "map": ("AP", None),
    "map_cut": ("AP", "cutoff"),
    "p": ("P", "cutoff"),
    "recall": ("R", "cutoff"),
    "ndcg": ("nDCG", None),
    "ndcg_cut": ("nDCG", "cutoff"),
    "recip_rank": ("RR", None),
    "rprec": ("Rprec", None),
    "bpref": ("Bpref", None),
    "infap": ("infAP", None),
    "success": ("Success", "cutoff"),
    "iprec_at_recall": ("IPrec", "level"),
    "set_p": ("SetP", None),
    "set_recall": ("SetR", None),
    "set_f": ("SetF", None),
}
# What each measure accepts: its cutoff ("required", "optional", None for none, "level" for
# IPrec's recall level) and its parameters (as ir-measures names them).
SHAPES = {
    "P": ("required", {"rel", "judged_only"}),
    "R": ("required", {"judged_only"}),
    "AP": ("optional", {"rel", "judged_only"}),
    "nDCG": ("optional", {"judged_only"}),
    "RR": ("optional", {"rel", "judged_only"}),
    "Success": ("required", {"rel", "judged_only"}),
    "Judged": ("optional", set()),
    "Rprec": (None, {"rel", "judged_only"}),
    "Bpref": (None, {"rel"}),
    "infAP": (None, {"rel"}),
    "IPrec": ("level", {"judged_only"}),
    "SetP": (None, {"rel", "judged_only"}),
    "SetR": (None, {"rel"}),
    "SetF": (None, {"rel", "beta", "judged_only"}),
    "N-RODCG": ("required", set()),
    "mean_rank": (None, set()),
}
# Measures whose value depends only on where the relevant passages rank: exact ranks beyond the
# stored hits serve them (unless judged_only, which re-ranks the returned passages).
RANK_ONLY = {"P", "R", "AP", "nDCG", "RR", "Success", "Rprec", "IPrec"}

TOKEN = re.compile(r"^(?P<name>[A-Za-z][A-Za-z_-]*?)(?:\((?P<params>[^()]*)\))?(?:@(?P<cutoff>[0-9.]+))?$")
TREC_EVAL_TOKEN = re.compile(r"^(?P<name>[A-Za-z_]+?)(?:_(?P<value>\d+(?:\.\d+)?))?$")
HELP = (
    "use ir-measures names (P@5, R@100, AP, AP@10, nDCG, nDCG@10, RR, RR@10, Success@5, Judged@10, "
    "Rprec, Bpref, infAP, IPrec@0.5, SetP, SetR, SetF, nDCG(judged_only=True)@10, P(rel=2)@5), "
    "trec_eval names (map, map_cut_10, P_5, recall_100, ndcg, ndcg_cut_10, recip_rank, bpref, "
    "success_5, iprec_at_recall_0.50, set_F) or N-RODCG@k and mean_rank"
)


@dataclass(frozen=True)
class Measure:
    """One measure with its cutoff and parameters. `key` is the project's spelling (evaluate_run's
    keys: recall@20, p@5, ndcg@10, mrr, map, bpref, judged@10, ndcg(judged_only=True)@10), `name`
    ir-measures' (R@20, P@5, nDCG@10, RR, AP, Bpref, Judged@10, nDCG(judged_only=True)@10)."""

    measure: str
    cutoff: int | None = None
    level: float | None = None  # IPrec's recall level
    rel: int | None = None
    judged_only: bool = False
    beta: float | None = None

    def _params(self) -> str:
        params = []
        if self.rel is not None:
            params.append(f"rel={self.rel}")
        if self.judged_only:
            params.append("judged_only=True")
        if self.beta is not None:
            params.append(f"beta={self.beta}")
        return f"({','.join(params)})" if params else ""

    def _suffix(self) -> str:
        if self.cutoff is not None:
            return f"@{self.cutoff}"
        return f"@{self.level:g}" if self.level is not None else ""

    # Cached: a report reads every measure's key once per query and summary.
    @cached_property
    def key(self) -> str:
        return KEY_STEMS[self.measure] + self._params() + self._suffix()

    @cached_property
    def name(self) -> str:
        return self.measure + self._params() + self._suffix()

    @property
    def relevance_level(self) -> int:
        return 1 if self.rel is None else self.rel

    @property
    def reads_exact_ranks(self) -> bool:
        """Exact ranks are stored for the passages with a positive relevance only."""
        return self.measure in RANK_ONLY and not self.judged_only and self.relevance_level >= 1

    def reach(self, relevant: int) -> int | None:
        """The deepest rank this measure reads for a query with `relevant` relevant passages
        (None: all of them), to tell whether a figure reaches past the stored hits."""
        if self.measure == "Rprec":
            return relevant
        return self.cutoff


def _refuse(token: str, reason: str) -> InputError:
    return InputError(f"{token!r}: {reason}", field="metrics")


def _parse_params(token: str, text: str, allowed: set[str]) -> dict:
    params: dict = {}
    for part in filter(None, (piece.strip() for piece in text.split(","))):
        name, _, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if name not in allowed:
            accepted = ", ".join(sorted(allowed)) or "no parameters"
            raise _refuse(token, f"unknown parameter {name!r} (this measure takes {accepted})")
        try:
            if name == "rel":
                params["rel"] = int(value)
            elif name == "beta":
                params["beta"] = float(value)
                if not math.isfinite(params["beta"]) or params["beta"] < 0:
                    raise ValueError
            elif value.lower() in ("true", "1", "false", "0"):
                params["judged_only"] = value.lower() in ("true", "1")
            else:
                raise ValueError
        except ValueError:
            raise _refuse(token, f"bad value {value!r} for {name}") from None
    return params


def _build(token: str, name: str, params: dict, suffix: str | None) -> Measure:
    shape, _ = SHAPES[name]
    if shape == "level":
        if suffix is None:
            raise _refuse(token, f"needs a recall level, e.g. {name}@0.5")
        level = float(suffix)
        if not 0 <= level <= 1:
            raise _refuse(token, "the recall level must lie between 0 and 1")
        return Measure(name, level=level, **params)
    if suffix is None:
        if shape == "required":
            raise _refuse(token, f"needs a cutoff, e.g. {name}@10")
        return Measure(name, **params)
    if shape is None:
        raise _refuse(token, f"{name} takes no cutoff")
    if not is_digits(suffix) or int(suffix) < 1:
        raise _refuse(token, "the cutoff must be a whole number of at least 1")
    if int(suffix) > 2**31 - 1:
        raise _refuse(token, "the cutoff is too large")
    return Measure(name, cutoff=int(suffix), **params)


def parse_measure(token: str) -> Measure:
    """One measure from its ir-measures, trec_eval or project name (InputError on `metrics`)."""
    match = TOKEN.match(token)
    name = SPELLINGS.get(match["name"].lower()) if match else None
    if match and name is not None:
        params = _parse_params(token, match["params"] or "", SHAPES[name][1])
        return _build(token, name, params, match["cutoff"])
    trec = TREC_EVAL_TOKEN.match(token)
    entry = TREC_EVAL_NAMES.get(trec["name"].lower()) if trec else None
    if entry is None:
        raise InputError(f"unknown metric {token!r}; {HELP}", field="metrics")
    name, takes = entry
    if (takes is None) != (trec["value"] is None):
        raise _refuse(token, f"trec_eval's {trec['name']} takes {'no value' if takes is None else 'a value after _'}")
    return _build(token, name, {}, trec["value"])


def split_metric_names(text: str | Sequence[str] | None) -> list[str]:
    """The names in a --metrics value: separated by spaces or commas, except the commas inside a
    measure's parentheses (`P(rel=2,judged_only=True)@5`)."""
    if not isinstance(text, str):
        return [str(name) for name in (text or [])]
    names, depth, current = [], 0, []
    for character in text:
        depth += (character == "(") - (character == ")")
        if depth == 0 and (character.isspace() or character == ","):
            names.append("".join(current))
            current = []
        else:
            current.append(character)
    names.append("".join(current))
    return [name for name in names if name]


def parse_measures(text: str | Sequence[str] | None, default: Sequence[str]) -> list[tuple[str, Measure]]:
    """(the name as written, the measure) for every distinct measure asked for, in order; the
    `default` names when none is given."""
    names = split_metric_names(text) or list(default)
    chosen: dict[Measure, str] = {}
    for name in names:
        chosen.setdefault(parse_measure(name), name)
    return [(name, measure) for measure, name in chosen.items()]


# --- one query ---------------------------------------------------------------------------------


def dcg(gains: Iterable[tuple[int, float]]) -> float:
    """Discounted cumulative gain of (rank, gain) pairs: each gain over log2(rank + 1)."""
    return sum(gain / math.log2(rank + 1) for rank, gain in gains)


@dataclass
class Ranking:
    """What the measures know about one query of a run (see the module docstring)."""

    judgments: Mapping[int, int]  # passage -> relevance: every judged passage of the query
    returned: Sequence[int]  # the passages the run stored for the query, best first
    exact_ranks: Mapping[int, int] | None = None  # relevant passage -> rank over the candidate set
    _relevant_ranks: dict = field(default_factory=dict, repr=False)
    _relevant: dict = field(default_factory=dict, repr=False)
    _judged_above: list[int] | None = field(default=None, repr=False)

    def relevant(self, level: int) -> int:
        if level not in self._relevant:
            self._relevant[level] = sum(1 for relevance in self.judgments.values() if relevance >= level)
        return self._relevant[level]

    def judged_above(self, n: int) -> int:
        """How many of the top `n` returned passages are judged: counted in one pass over the
        returned passages that every Judged@k cutoff of the query then reads."""
        if self._judged_above is None:
            self._judged_above = list(accumulate(map(self.judgments.__contains__, self.returned), initial=0))
        return self._judged_above[n]

    def judged_non_relevant(self, level: int) -> int:
        return sum(1 for relevance in self.judgments.values() if 0 <= relevance < level)

    def listed(self, judged_only: bool) -> Sequence[int]:
        """The returned passages, without the unjudged (and pooled-unjudged) ones for judged_only."""
        if not judged_only:
            return self.returned
        return [pk for pk in self.returned if self.judgments.get(pk, -1) >= 0]

    def relevant_ranks(self, level: int, *, judged_only: bool = False, exact: bool = True) -> list[int]:
        """Sorted ranks of the relevant passages: exact ones where known (and asked for), else
        their positions among the returned (or, judged_only, the judged returned) passages."""
        key = (level, judged_only, exact)
        if key not in self._relevant_ranks:
            if exact and not judged_only and self.exact_ranks is not None:
                ranks = [rank for pk, rank in self.exact_ranks.items() if self.judgments.get(pk, 0) >= level]
            else:
                listed = self.listed(judged_only)
                ranks = [rank for rank, pk in enumerate(listed, 1) if self.judgments.get(pk, -1) >= level]
            self._relevant_ranks[key] = sorted(ranks)
        return self._relevant_ranks[key]

    def ranked_gains(self, judged_only: bool, exact: bool = True) -> list[tuple[int, float]]:
        """(rank, relevance) of every passage with a positive relevance, as nDCG counts them."""
        if exact and not judged_only and self.exact_ranks is not None:
            pairs = [(rank, self.judgments.get(pk, 0)) for pk, rank in self.exact_ranks.items()]
        else:
            pairs = [(rank, self.judgments.get(pk, 0)) for rank, pk in enumerate(self.listed(judged_only), 1)]
        return [(rank, float(gain)) for rank, gain in pairs if gain > 0]

    def value(self, measure: Measure, *, exact: bool = True) -> float:
        """The measure's value for this query (`exact` False: from the returned passages only,
        what the exported run file gives)."""
        handler = MEASURES.get(measure.measure)
        if handler is None:
            raise InputError(f"{measure.name} is not computed from a ranking alone", field="metrics")
        return handler(self, measure, exact and measure.reads_exact_ranks)

    def reaches_past_returned(self, measure: Measure) -> bool:
        """Whether this query's value reads an exact rank below the stored hits."""
        if not measure.reads_exact_ranks or not self.exact_ranks:
            return False
        if max(self.exact_ranks.values()) <= len(self.returned):
            return False
        level = measure.relevance_level
        deepest = measure.reach(self.relevant(level))
        if deepest is not None and deepest <= len(self.returned):
            return False
        return any(
            rank > len(self.returned) and (deepest is None or rank <= deepest) for rank in self.relevant_ranks(level)
        )


def _found(ranks: Sequence[int], cutoff: int | None) -> int:
    return sum(1 for rank in ranks if cutoff is None or rank <= cutoff)


def _precision(query: Ranking, measure: Measure, exact: bool) -> float:
    ranks = query.relevant_ranks(measure.relevance_level, judged_only=measure.judged_only, exact=exact)
    return _found(ranks, measure.cutoff) / measure.cutoff


def _recall(query: Ranking, measure: Measure, exact: bool) -> float:
    relevant = query.relevant(1)
    ranks = query.relevant_ranks(1, judged_only=measure.judged_only, exact=exact)
    return _found(ranks, measure.cutoff) / relevant if relevant else 0.0


def _average_precision(query: Ranking, measure: Measure, exact: bool) -> float:
    level = measure.relevance_level
    relevant = query.relevant(level)
    ranks = query.relevant_ranks(level, judged_only=measure.judged_only, exact=exact)
    total = sum(found / rank for found, rank in enumerate(ranks, 1) if measure.cutoff is None or rank <= measure.cutoff)
    return total / relevant if relevant else 0.0


def _ndcg(query: Ranking, measure: Measure, exact: bool) -> float:
    k = measure.cutoff
    gains = [(rank, gain) for rank, gain in query.ranked_gains(measure.judged_only, exact) if k is None or rank <= k]
    ideal_gains = sorted((relevance for relevance in query.judgments.values() if relevance > 0), reverse=True)
    ideal = dcg(enumerate(ideal_gains[:k] if k is not None else ideal_gains, 1))
    return dcg(gains) / ideal if ideal else 0.0


def _reciprocal_rank(query: Ranking, measure: Measure, exact: bool) -> float:
    ranks = query.relevant_ranks(measure.relevance_level, judged_only=measure.judged_only, exact=exact)
    first = ranks[0] if ranks else None
    return 1.0 / first if first is not None and (measure.cutoff is None or first <= measure.cutoff) else 0.0


def _success(query: Ranking, measure: Measure, exact: bool) -> float:
    ranks = query.relevant_ranks(measure.relevance_level, judged_only=measure.judged_only, exact=exact)
    return 1.0 if ranks and ranks[0] <= measure.cutoff else 0.0


def _r_precision(query: Ranking, measure: Measure, exact: bool) -> float:
    level = measure.relevance_level
    relevant = query.relevant(level)
    ranks = query.relevant_ranks(level, judged_only=measure.judged_only, exact=exact)
    return _found(ranks, relevant) / relevant if relevant else 0.0


def _interpolated_precision(query: Ranking, measure: Measure, exact: bool) -> float:
    relevant = query.relevant(1)
    if not relevant:
        return 0.0
    ranks = query.relevant_ranks(1, judged_only=measure.judged_only, exact=exact)
    precisions = [found / rank for found, rank in enumerate(ranks, 1) if found / relevant >= measure.level]
    return max(precisions, default=0.0)


def judged_share(query: Ranking, cutoff: int | None) -> float:
    """Judged@k as ir-measures computes it (see the module docstring)."""
    top = len(query.returned) if cutoff is None else min(cutoff, len(query.returned))
    return query.judged_above(top) / top if top else 0.0


def _judged(query: Ranking, measure: Measure, exact: bool) -> float:
    return judged_share(query, measure.cutoff)


def _bpref(query: Ranking, measure: Measure, exact: bool) -> float:
    level = measure.relevance_level
    relevant, non_relevant = query.relevant(level), query.judged_non_relevant(level)
    if not relevant:
        return 0.0
    total, above = 0.0, 0
    for pk in query.returned:
        relevance = query.judgments.get(pk)
        if relevance is None or relevance < 0:
            continue
        if relevance < level:
            above += 1
        else:
            total += 1.0 - min(above, relevant) / min(relevant, non_relevant) if above else 1.0
    return total / relevant


def _inferred_ap(query: Ranking, measure: Measure, exact: bool) -> float:
    level = measure.relevance_level
    relevant = query.relevant(level)
    total, found, non_relevant, pooled = 0.0, 0, 0, 0
    for index, pk in enumerate(query.returned):
        relevance = query.judgments.get(pk)
        if relevance is None:
            continue  # not in the pool
        if relevance < 0:
            pooled += 1  # pooled, not judged
        elif relevance < level:
            non_relevant += 1
        else:
            found += 1
            if index == 0:
                total += 1.0
            else:
                above_in_pool = (found - 1 + non_relevant + pooled) / index
                relevant_share = (found - 1 + INFAP_EPSILON) / (found - 1 + non_relevant + 2 * INFAP_EPSILON)
                total += 1.0 / (index + 1) + index / (index + 1) * above_in_pool * relevant_share
    return total / relevant if relevant else 0.0


def _set_counts(query: Ranking, measure: Measure) -> tuple[int, int, int]:
    """(relevant returned, returned, relevant) for the Set measures."""
    listed = query.listed(measure.judged_only)
    level = measure.relevance_level
    found = sum(1 for pk in listed if query.judgments.get(pk, -1) >= level)
    return found, len(listed), query.relevant(level)


def _set_precision(query: Ranking, measure: Measure, exact: bool) -> float:
    found, returned, _ = _set_counts(query, measure)
    return found / returned if returned else 0.0


def _set_recall(query: Ranking, measure: Measure, exact: bool) -> float:
    found, _, relevant = _set_counts(query, measure)
    return found / relevant if relevant else 0.0


def _set_f(query: Ranking, measure: Measure, exact: bool) -> float:
    found, returned, relevant = _set_counts(query, measure)
    precision = found / returned if returned else 0.0
    recall = found / relevant if relevant else 0.0
    beta = 1.0 if measure.beta is None else measure.beta  # trec_eval weighs by beta, not its square
    denominator = beta * precision + recall
    return (1 + beta) * precision * recall / denominator if denominator else 0.0


MEASURES = {
    "P": _precision,
    "R": _recall,
    "AP": _average_precision,
    "nDCG": _ndcg,
    "RR": _reciprocal_rank,
    "Success": _success,
    "Rprec": _r_precision,
    "IPrec": _interpolated_precision,
    "Judged": _judged,
    "Bpref": _bpref,
    "infAP": _inferred_ap,
    "SetP": _set_precision,
    "SetR": _set_recall,
    "SetF": _set_f,
}
