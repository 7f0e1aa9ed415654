"""What the adjudication workspace reads: an item with every counted answer side by side, and a
page of the queue. One payload for the page and the REST API.

Annotators appear as A, B, C ... within each item, in the order they answered; their names,
the gold candidate, passage and query ids are added for staff only (`staff=True`): an
adjudicator who is not staff decides from what the annotators saw and said.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from django.core.paginator import Page, Paginator

from .label_schema import study_schema
from .models import Adjudication, ItemCandidate, Rework, Study
from .presentation import DEFAULT_OPTION_KEYS
from .provenance import answer_key
from .selectors import counted_judgments, query_display_text, shown_item, span_target_text
from .services.adjudication import (
    QueuePlace,
    counted_agreement,
    current_queue,
    queue_counts,
    queue_entries,
    queue_place,
    reasons,
    rework_payload,
)
from .services.quality import adjudication_payload, judgment_seconds
from .ui_selectors import describe_answer, keyed_values, masked_text_segments

QUEUE_PAGE_SIZE = 50


def pseudonym(index: int) -> str:
    """A, B, ..., Z, then AA, AB, ... for the annotator who answered `index`-th (0-based)."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return letters


def _spans(study: Study, item, spans: list[dict], texts: dict[str, str]) -> list[dict]:
    """Each span with the excerpt it marks, read from the text its offsets count."""
    marked = []
    for span in spans or []:
        target = span.get("target")
        if target not in texts:
            texts[target] = span_target_text(study, item, target)
        marked.append({**span, "text": texts[target][span["start"] : span["end"]]})
    return marked


def item_answers(item, *, staff: bool, place: QueuePlace | None = None) -> dict:
    """The item as annotators saw it, every counted judgment (answer, seconds, unsure mark,
    rationale, spans with their excerpts, rubric) under its pseudonym, how much they agree, the
    decision so far, the times it was sent back, the study's reasons and the item's place in
    the queue."""
    study = item.study
    payload = shown_item(item)
    judgments = list(counted_judgments(study).filter(item=item).order_by("submitted_at", "pk"))
    texts: dict[str, str] = {}
    answers = []
    for index, judgment in enumerate(judgments):
        answer = {
            "annotator": pseudonym(index),
            "position": judgment.choice.position if judgment.choice_id else None,
            "candidate": judgment.choice_id,
            "label": judgment.label,
            "selections": judgment.selections,
            "spans": _spans(study, item, judgment.spans, texts),
            "rubric": judgment.rubric,
            "rationale": judgment.rationale,
            "unsure": judgment.unsure,
            "seconds": judgment_seconds(judgment.seconds, judgment.server_seconds),
            "submitted_at": judgment.submitted_at.isoformat(),
        }
        if staff:
            answer["name"] = judgment.annotator.get_username()
        answers.append(answer)
    score, keys = counted_agreement(item)
    adjudication = Adjudication.objects.filter(item=item).select_related("choice", "decided_by").first()
    reworks = Rework.objects.filter(item=item).select_related("sent_by").order_by("sent_at", "pk")
    place = place or queue_place(study, item, score)
    counts = Counter(keys)
    payload.update(
        {
            "number": item.position + 1,
            "judgments": answers,
            "answer_counts": [
                {"answer": list(key) if isinstance(key, tuple) else key, "count": count}
                for key, count in sorted(counts.items(), key=lambda pair: (-pair[1], str(pair[0])))
            ],
            "agreement": score,
            "decision": adjudication_payload(adjudication),
            "reworks": [rework_payload(rework) for rework in reworks],
            "reasons": reasons(study).texts,
            "reason_required": score is not None and score < 1,
            "queue": {"number": place.number, "entries": place.entries, "previous": place.previous, "next": place.next},
        }
    )
    if staff:
        gold = ItemCandidate.objects.filter(item=item, is_gold=True).values_list("position", flat=True).first()
        payload.update({"query": item.query.external_id, "gold_position": gold})
    return payload


def decision_key(study: Study, decision: dict | None):
    """A decision payload as an answer key (what the page marks as chosen)."""
    if decision is None:
        return None
    return answer_key(study, position=decision["position"], label=decision["label"], selections=decision["selections"])


def queue_page(study: Study, page_number, *, staff: bool, size: int = QUEUE_PAGE_SIZE) -> tuple[list[dict], Page, dict]:
    """One page of the queue in order (rank: the 0-based place, item, its study number,
    agreement, judgments, sampled or back from rework, the decision so far) and the queue's
    counts."""
    queue = current_queue(study)
    page = Paginator(queue_entries(study), size).get_page(page_number)
    rows = []
    for place, entry in enumerate(page, start=page.start_index() - 1):
        decision = getattr(entry.item, "adjudication", None)
        row = {
            "item": entry.item_id,
            "rank": place,
            "number": entry.item.position + 1,
            "agreement": entry.agreement,
            "judgments": entry.judgments,
            "sampled": entry.sampled,
            "reworked": entry.reworked,
            "status": "decided" if decision else "undecided",
            "decision": adjudication_payload(decision),
        }
        if staff:
            row["query"] = entry.item.query.external_id
        rows.append(row)
    return rows, page, queue_counts(study, queue)


# Reasons are picked with Shift and their number (the digits alone pick answers).
REASON_KEYS = "123456789"


def workspace_page(item, *, staff: bool) -> dict:
    """`item_answers` laid out for the workspace page: every answer in words, the candidates
    with who chose each, the decision's options with their keys (as on the annotation page:
    1-9, 0, a-j for candidates and paragraphs, a scale's own digits, y/n for yes/no), the
    reasons with theirs, and what is decided so far marked."""
    data = item_answers(item, staff=staff)
    study = item.study
    schema = study_schema(study)
    multi_select = bool(schema.get("multi_select"))
    chosen_by = defaultdict(list)
    for answer in data["judgments"]:
        answer["text"] = describe_answer(
            study, schema, position=answer["position"], label=answer["label"], selections=answer["selections"]
        )
        for position in [answer["position"]] if answer["position"] is not None else answer["selections"] or []:
            chosen_by[position].append(answer["annotator"])
    decided = decision_key(study, data["decision"])
    decided_positions = set(decided) if multi_select and decided is not None else {decided}
    candidates = [
        {
            **candidate,
            "number": candidate["position"] + 1,
            "chosen_by": chosen_by.get(candidate["position"], []),
            "is_gold": staff and candidate["position"] == data.get("gold_position"),
        }
        for candidate in data["candidates"]
    ]
    if study.kind == Study.Kind.PROXY or multi_select:
        noun = "paragraph" if multi_select else "option"
        options = [
            {
                "value": c["position"],
                "label": f"{noun} {c['number']}",
                "key": DEFAULT_OPTION_KEYS[c["position"]] if c["position"] < len(DEFAULT_OPTION_KEYS) else "",
                "chosen": c["position"] in decided_positions,
            }
            for c in candidates
        ]
    else:
        options = [
            {**option, "chosen": option["value"] == decided}
            for option in keyed_values(data["values"], yes_no=study.kind == Study.Kind.QUOTABILITY)
        ]
    query_text = query_display_text(item.query, study.context_left, study.context_right)
    rubric_names = list(dict.fromkeys(name for answer in data["judgments"] for name in answer["rubric"] or {}))
    return {
        **data,
        "field": "selections" if multi_select else "position" if study.kind == Study.Kind.PROXY else "label",
        "multiple": multi_select,
        "options": options,
        "candidates": candidates if study.kind == Study.Kind.PROXY or multi_select else candidates[:1],
        "query_segments": masked_text_segments(query_text),
        "decision_text": None
        if data["decision"] is None
        else describe_answer(
            study,
            schema,
            position=data["decision"]["position"],
            label=data["decision"]["label"],
            selections=data["decision"]["selections"],
        ),
        "reason_options": [
            {
                "text": text,
                "key": REASON_KEYS[n] if n < len(REASON_KEYS) else "",
                "chosen": data["decision"] is not None and data["decision"]["reason"] == text,
            }
            for n, text in enumerate(data["reasons"])
        ],
        "agreement_percent": None if data["agreement"] is None else round(100 * data["agreement"]),
        "rubric_rows": [
            {
                "name": name.replace("_", " ").capitalize(),
                "values": [(answer["rubric"] or {}).get(name) for answer in data["judgments"]],
            }
            for name in rubric_names
        ],
    }


def queue_page_rows(study: Study, page_number, *, staff: bool) -> tuple[list[dict], Page, dict]:
    """`queue_page` with each decision in words, for the queue page."""
    rows, page, counts = queue_page(study, page_number, staff=staff)
    schema = study_schema(study)
    for row in rows:
        decision = row["decision"]
        row["decision_text"] = (
            None
            if decision is None
            else describe_answer(
                study, schema, position=decision["position"], label=decision["label"], selections=decision["selections"]
            )
        )
        row["agreement_percent"] = round(100 * row["agreement"])
    return rows, page, counts
