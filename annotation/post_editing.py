"""Post-editing, a recorded study condition: an annotator is shown a proposed answer (a judge's,
though the page only ever calls it "a suggested label") pre-selected, and keeps or changes it.

The condition is per item: `Item.proposal` holds the answer shown ({"label": v} for label kinds,
{"position": p}, a 0-based display position, for proxy items) and only items with one are shown
it; which items (a seeded share, or all) and which judge proposed them is staff's, in
`Study.parameters["post_editing"]` (judges.post_editing sets both). Every web judgment of such a
study records whether a proposal was shown and whether the answer kept it, so reports compare
the two conditions (evaluation.post_editing).

A study without the condition is untouched: its payload has no `proposal` key and its requests
run no statement more (the study row, which the hot path loads anyway, says whether it has it).
Proposals are set before anyone answers, so no judgment predates its item's condition.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.db import transaction

from retrieval.errors import InputError

from .label_schema import study_schema
from .models import Item, ItemCandidate, Judgment, Study
from .presentation import shown_order

CONDITION_KEY = "post_editing"


def has_post_editing(study: Study) -> bool:
    return bool((study.parameters or {}).get(CONDITION_KEY))


def proposal_payload(item: Item, annotator_id: int | None = None, shown_count: int = 0) -> dict:
    """The annotator's view of the condition: `proposal`, the answer shown pre-selected, or None
    (nothing about who proposed it); empty for a study without the condition. A proposed
    candidate is named by where this annotator sees it (`shown_count` candidates, in their
    order where the study shuffles per annotator), as every position on the page is."""
    if not has_post_editing(item.study):
        return {}
    proposal = item.proposal
    if proposal and "position" in proposal:
        order = shown_order(item.study, item.pk, annotator_id, shown_count)
        proposal = {"position": order.index(proposal["position"])}
    return {"proposal": proposal}


def proposal_record(item: Item, *, choice_position: int | None, label, selections) -> dict:
    """The judgment's `proposal_shown` and `proposal_kept` for an answer to `item` (decided on
    the server from the answer stored, whatever a client says)."""
    proposal = item.proposal if has_post_editing(item.study) else None
    if not proposal:
        return {"proposal_shown": False, "proposal_kept": None}
    if "position" in proposal:
        kept = choice_position == proposal["position"]
    else:
        kept = not selections and label == proposal["label"]
    return {"proposal_shown": True, "proposal_kept": kept}


def _checked(study: Study, item_id: int, proposal: Mapping, positions: set[tuple[int, int]]) -> dict:
    """A proposal in the shape the study answers in, or InputError naming `proposals`.
    `positions`: the study's (item id, display position) pairs."""
    if study.kind == Study.Kind.PROXY:
        position = proposal.get("position")
        if set(proposal) != {"position"} or (item_id, position) not in positions:
            raise InputError(f"item {item_id}: no candidate shown at position {position!r}", field="proposals")
        return {"position": position}
    schema = study_schema(study)
    label = proposal.get("label")
    if set(proposal) != {"label"} or schema["multi_select"] or label not in schema["values"]:
        raise InputError(
            f"item {item_id}: a proposal is {{'label': v}} with v on the study's scale {schema['values']}",
            field="proposals",
        )
    return {"label": label}


def refuse_if_answered(study: Study) -> None:
    """The condition is set before anyone answers (checked before asking a judge, and again in
    the transaction that sets it)."""
    if Judgment.objects.filter(item__study=study).exists():
        raise InputError(
            f"study {study.pk} already has judgments; the condition must be set before anyone answers", field="study"
        )


def set_proposals(study: Study, proposals: Mapping[int, Mapping], condition: dict) -> int:
    """Make `study` a post-editing study: each item id in `proposals` shows that answer
    pre-selected, the others none; `condition` (who proposed, the share, the seed) is kept for
    staff. Refused once the study has a judgment: items judged without the condition would be
    counted under it. Returns how many items show a proposal."""
    with transaction.atomic():
        refuse_if_answered(study)
        items = {item.pk: item for item in Item.objects.filter(study=study).only("pk", "proposal")}
        missing = sorted(set(proposals) - set(items))
        if missing:
            raise InputError(f"items {missing[:5]} are not items of study {study.pk}", field="proposals")
        positions = set(ItemCandidate.objects.filter(item__study=study).values_list("item_id", "position"))
        for item_id, item in items.items():
            item.proposal = _checked(study, item_id, proposals[item_id], positions) if item_id in proposals else None
        Item.objects.bulk_update(list(items.values()), ["proposal"], batch_size=500)
        study.parameters = {**(study.parameters or {}), CONDITION_KEY: {**condition, "items": len(proposals)}}
        study.save(update_fields=["parameters"])
    return len(proposals)
