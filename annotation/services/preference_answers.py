"""Validating an answer to a preference item (see annotation/preference_schema.py for the format).

What a client may send, by the names every path already uses (the web form, the REST API,
import_judgments all end here through labels.validate_answer):
- a strict pairwise preference: the chosen candidate, or its display `position`;
- `label` "tie" or "both_bad" (where the study allows them);
- a list (or a pair): `label` {"ranking": [[positions], ...]} with tie groups best first, or
  {"ranks": [rank of the candidate at position 0, 1, ...]} as the page's rank fields post it
  (equal ranks are a tie; only their order matters), or "both_bad".
Spans, rubric, rationale and selections belong to the label kinds and are refused here.
"""

from __future__ import annotations

from collections.abc import Sequence

from retrieval.errors import InputError
from retrieval.input_rules import is_digits

from ..label_schema import study_schema
from ..models import Item, ItemCandidate, Study
from ..preference_schema import BOTH_BAD, TIE


def validate_preference_answer(
    study: Study,
    item: Item,
    *,
    candidate: ItemCandidate | None,
    position,
    label,
    extras: dict,
    shown: Sequence[ItemCandidate] | None = None,
):
    """(choice, label) ready to store, or InputError naming the field (position, candidate,
    label, label.ranking, label.ranks)."""
    for name, value in extras.items():
        if value not in (None, "", [], {}):
            raise InputError("a preference study takes the order of the candidates only", field=name)
    schema = study_schema(study)
    candidates = (
        list(shown) if shown is not None else list(ItemCandidate.objects.filter(item=item).order_by("position"))
    )
    size = len(candidates)
    if candidate is not None or position is not None:
        if label is not None:
            raise InputError("give the preferred candidate or a label, not both", field="label")
        if size != 2:
            raise InputError("a list is answered with its ranking, not one candidate", field="position")
        best = _chosen_position(item, candidates, candidate, position)
        groups = [[best], [1 - best]]
    elif label == BOTH_BAD:
        if not schema["bad"]:
            raise InputError("this study does not offer the 'both bad' answer", field="label")
        return None, {BOTH_BAD: True, "shown": [c.pk for c in candidates]}
    elif label == TIE:
        groups = [list(range(size))]
    elif isinstance(label, dict) and set(label) == {"ranking"}:
        groups = _ranking(label["ranking"], size)
    elif isinstance(label, dict) and set(label) == {"ranks"}:
        groups = _ranks(label["ranks"], size)
    elif label is None:
        raise InputError("choose the better candidate (or a tie, where allowed)", field="position")
    else:
        raise InputError(
            "must be 'tie', 'both_bad', {\"ranking\": [[positions], ...]} or {\"ranks\": [ranks]}", field="label"
        )
    if not schema["ties"] and any(len(group) > 1 for group in groups):
        raise InputError("this study asks for a strict order: no ties", field="label")
    choice = candidates[groups[0][0]] if len(groups[0]) == 1 else None
    return choice, {"order": groups, "shown": [c.pk for c in candidates]}


def _chosen_position(item: Item, candidates: list[ItemCandidate], candidate, position) -> int:
    if candidate is not None:
        if candidate.item_id != item.pk or (position is not None and candidate.position != position):
            raise InputError("that candidate is not one of this item's", field="candidate")
        return candidate.position
    if isinstance(position, str) and is_digits(position.strip()):
        position = int(position)
    if isinstance(position, bool) or not isinstance(position, int):
        raise InputError(f"must be an integer, got {position!r}", field="position")
    if not 0 <= position < len(candidates):
        raise InputError(f"this item has no candidate at position {position}", field="position")
    return position


def _ranking(ranking, size: int) -> list[list[int]]:
    """Tie groups of positions, best first, covering every position exactly once."""
    field = "label.ranking"
    if not isinstance(ranking, list) or not ranking:
        raise InputError("must be a list of groups of positions, best first", field=field)
    groups = []
    for group in ranking:
        members = group if isinstance(group, list) else [group]
        if not members or any(isinstance(p, bool) or not isinstance(p, int) for p in members):
            raise InputError(f"a group must hold candidate positions, got {group!r}", field=field)
        groups.append(sorted(members))
    placed = [position for group in groups for position in group]
    if sorted(placed) != list(range(size)):
        raise InputError(f"must place each of the positions 0-{size - 1} exactly once, got {placed}", field=field)
    return groups


def _ranks(ranks, size: int) -> list[list[int]]:
    """The page's rank fields: one rank per display position; equal ranks are tied."""
    field = "label.ranks"
    if not isinstance(ranks, list) or len(ranks) != size:
        raise InputError(f"give every one of the {size} candidates a rank", field=field)
    values = []
    for rank in ranks:
        if rank is None or rank == "":
            raise InputError(f"give every one of the {size} candidates a rank", field=field)
        if isinstance(rank, str) and is_digits(rank.strip()):
            rank = int(rank)
        if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= size:
            raise InputError(f"a rank must be 1 to {size}, got {rank!r}", field=field)
        values.append(rank)
    return [[p for p, value in enumerate(values) if value == rank] for rank in sorted(set(values))]
