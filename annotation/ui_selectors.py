"""Read-side helpers for the web pages that `annotation.selectors` does not cover: the
annotator's list of studies, the staff study list and study detail, the keyboard scheme of every
kind of item and how a masked query text is split around its slot.

Annotator-facing functions here build on `annotation.selectors` and add nothing about gold,
provenance or external ids; the staff functions (`staff_*`) may show them.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from django.db.models import Count, Q

from retrieval.input_rules import is_digits

from .label_schema import study_schema
from .models import AnnotatorFlag, Assignment, Item, ItemCandidate, Judgment, PeerReview, Study, StudyBlock
from .preference_schema import describe_preference
from .presentation import ACTION_WORDS, DEFAULT_OPTION_KEYS, TEN_KEY, value_keys
from .selectors import (
    MASK_MARK,
    annotator_progress,
    span_target_text,
    studies_open_to,
    study_overview,
)
from .services import annotator_refusal
from .services.qualification import QualificationStatus, qualification_state
from .services.quality import QualityMeasures, quality_overview

# What the page calls the text a span target names, by study kind.
SPAN_TARGET_NAMES = {
    Study.Kind.RELEVANCE: {"query": "query", "passage": "passage"},
    Study.Kind.QUOTABILITY: {"query": "context", "passage": "paragraph"},
}
# BEIR-style RELiC queries carry the mask inside their text; label studies write it as MASK_MARK.
MASK_MARKER = re.compile(rf"\[masked sentences?(?:\(s\))?\]|{re.escape(MASK_MARK)}", re.IGNORECASE)


def keyed_candidates(candidates: list[dict], option_keys: str = DEFAULT_OPTION_KEYS) -> list[dict]:
    """The payload's candidates with their 1-based option number and the key that picks each
    (the study's option keys, in the order shown)."""
    return [
        {**candidate, "number": index + 1, "key": option_keys[index] if index < len(option_keys) else ""}
        for index, candidate in enumerate(candidates)
    ]


def masked_text_segments(text: str) -> list[dict]:
    """A query's own text cut at each mask marker: [{"text": ..., "slot": False}, {"text":
    "[masked sentence(s)]", "slot": True}, ...], so the page can style the slot."""
    segments, cursor = [], 0
    for match in MASK_MARKER.finditer(text):
        segments.append({"text": text[cursor : match.start()], "slot": False})
        segments.append({"text": match.group(0), "slot": True})
        cursor = match.end()
    segments.append({"text": text[cursor:], "slot": False})
    return [segment for segment in segments if segment["text"]]


def annotation_page(work: dict, study: Study) -> dict:
    """`next_work`'s payload made ready for the page: candidates with their numbers and keys,
    a plain-text query cut around its mask, and the keys the page explains (the legend under the
    form and the list of every shortcut the `?` key opens); for label kinds also the keyed scale
    and rubric values and the query as one text (see `label_task`)."""
    if work["finished"]:
        return work
    keys = work["keys"]
    candidates = keyed_candidates(work["candidates"], keys["options"])
    page = {
        **work,
        "candidates": candidates,
        "query_segments": masked_text_segments(work["query_text"]) if work["query_text"] else [],
        "keys_hint": options_hint(keys["options"], len(candidates)),
    }
    if study.kind == Study.Kind.PREFERENCE:
        page["preference"] = preference_task(page)
    elif study.kind != Study.Kind.PROXY:
        page["task"] = label_task(page, study)
    in_round = work.get("qualification", {}).get("status") == QualificationStatus.IN_PROGRESS
    page["shortcuts"] = page_shortcuts(page, keys, item_actions=not in_round)
    return page


# A pair's answers besides the two candidates, with their keys.
TIE_KEY, BOTH_BAD_KEY = "t", "b"


def preference_task(work: dict) -> dict:
    """A preference item as the page lays it out: the candidates keyed 1, 2, ... (a pair's radio
    picks one; a list's candidates each get rank radios 1..n, keyed by rank), the tie and
    "both bad" answers where the study allows them, and the keys to explain."""
    task, candidates = work["preference"], work["candidates"]
    listwise = task["shape"] == "listwise"
    ranks = [str(rank) for rank in range(1, len(candidates) + 1)] if listwise else []
    if listwise:
        legend = [
            {"keys": f"1-{len(candidates)}", "action": "rank the passage in the frame (the next one follows)"},
            {"keys": "Tab", "action": "next passage (Shift+Tab: back)"},
        ]
    else:
        legend = [{"keys": " / ".join(c["key"] for c in candidates), "action": "the better passage"}]
        if task["ties"]:
            legend.append({"keys": TIE_KEY, "action": "tie"})
    if task["bad"]:
        legend.append({"keys": BOTH_BAD_KEY, "action": "none is good" if listwise else "both bad"})
    legend.append({"keys": "Enter", "action": "submit"})
    return {
        **task,
        "listwise": listwise,
        "ranks": ranks,
        "tie_key": TIE_KEY,
        "both_bad_key": BOTH_BAD_KEY,
        "keys": legend,
    }


def label_task(work: dict, study: Study) -> dict:
    """A relevance or quotability item as the page lays it out: the query as the one text span
    offsets count (cut around its mask for display), the passages (keyed in a multi-select),
    the scale and each rubric field as keyed options, where spans are marked and the keys to
    explain. Hidden gold and work items give the same shape: only the payload goes in."""
    spans = work["spans"]
    target = spans["target"] if spans else None
    multi_select = work["multi_select"]
    option_keys = work["keys"]["options"]
    query_text = spans["text"] if target == "query" else span_target_text(study, _shown_item(work), "query")
    yes_no = study.kind == Study.Kind.QUOTABILITY
    rubric = [
        {
            "name": field["name"],
            "title": field["name"].replace("_", " ").capitalize(),
            "options": keyed_values(field["values"], option_keys=option_keys),
        }
        for field in work["rubric"]
    ]
    label_options = [] if multi_select else keyed_values(work["values"], yes_no=yes_no, option_keys=option_keys)
    span_noun = SPAN_TARGET_NAMES[study.kind][target] if target else None
    selectable = len(work["candidates"]) if multi_select else 0
    return {
        "question": work["question"],
        "title": work["query_title"],
        "query_text": query_text,
        "query_segments": masked_text_segments(query_text),
        "passages": work["candidates"] if multi_select else work["candidates"][:1],
        "multi_select": multi_select,
        "span_target": target,
        "span_noun": span_noun,
        "spans_required": bool(spans and spans["required"]),
        "label_options": label_options,
        "rubric": rubric,
        "rationale": work["rationale"],
        "keys": _label_keys(
            label_options, rubric, option_keys[:selectable], span_noun, work["rationale"], work["keys"]
        ),
    }


def _shown_item(work: dict) -> Item:
    return Item.objects.select_related("query").get(pk=work["item"])


def keyed_values(values: list[dict], *, yes_no: bool = False, option_keys: str = DEFAULT_OPTION_KEYS) -> list[dict]:
    """Scale or rubric values ({"value", "label"}) with the key that picks each
    (annotation.presentation.value_keys: y/n, the value's digit, else the option keys)."""
    keys = value_keys([entry["value"] for entry in values], yes_no=yes_no, option_keys=option_keys)
    # A bare number needs no name beside the key that already shows it.
    return [{**entry, "key": key, "named": entry["label"] != key} for entry, key in zip(values, keys)]


def _label_keys(
    label_options: list[dict], rubric: list[dict], selectable: str, span_noun, rationale: str, keys: dict
) -> list[dict]:
    """The key legend of a label item, one {"keys", "action"} per line the page shows."""
    legend = []
    if label_options:
        legend.append({"keys": _key_range(label_options), "action": "answer"})
    if selectable:
        legend.append({"keys": options_hint(selectable, len(selectable)), "action": "select or unselect a paragraph"})
    if rubric or rationale != "none":
        legend.append({"keys": "Tab", "action": "next field" + (" (rubric, rationale)" if rationale != "none" else "")})
    if span_noun and keys["mark"]:
        legend.append({"keys": keys["mark"], "action": f"mark the text selected in the {span_noun}"})
    legend.append(
        {"keys": "Enter", "action": "submit" + (" (Ctrl+Enter in the rationale)" if rationale != "none" else "")}
    )
    return legend


def _key_range(options: list[dict]) -> str:
    """ "0-10 (t for 10)", "0-3", "n / y"."""
    keys = [option["key"] for option in options]
    if keys and all(is_digits(key) or key == TEN_KEY for key in keys) and len(keys) > 2:
        digits = [key for key in keys if is_digits(key)]
        hint = f"{digits[0]}-{digits[-1]}"
        return f"{hint}, {TEN_KEY} for 10" if TEN_KEY in keys else hint
    return " / ".join(keys)


def options_hint(option_keys: str, count: int) -> str:
    """How the keys map to `count` options: "1-3", "1-9, 0 for 10", "1-9, 0 for 10, a-c for
    11-13" with the default keys, else the keys themselves ("a s d f")."""
    keys = option_keys[:count]
    if not DEFAULT_OPTION_KEYS.startswith(keys):
        return " ".join(keys)
    if count <= 9:
        return f"1-{count}"
    hint = "1-9, 0 for 10"
    if count > 10:
        hint += f", a-{keys[-1]} for 11-{count}" if count > 11 else ", a for 11"
    return hint


def page_shortcuts(page: dict, keys: dict, *, item_actions: bool) -> list[dict]:
    """Every shortcut of an annotation page, for the list the `?` key opens: {"keys": [key
    names], "action": words}. Item actions (skip, flag, unsure) are not offered during a
    qualification round; an action whose key the study turned off is left out."""
    task = page.get("task")
    rows = []
    if task is None:
        rows.append({"keys": [page["keys_hint"]], "action": "choose that candidate"})
    else:
        for entry in task["keys"]:
            if entry["keys"] not in ("Tab", "Enter", keys["mark"]):
                rows.append({"keys": [entry["keys"]], "action": entry["action"]})
    rows += [
        {"keys": ["↑", "↓"], "action": "choose the option above or below in the current field"},
        {"keys": ["Tab", "Shift+Tab"], "action": "go to the next or previous field, button or link"},
        {"keys": ["Enter"], "action": "submit the answer"},
        {"keys": ["Ctrl+Enter"], "action": "submit from a text box (rationale, flag reason)"},
        {"keys": ["Esc"], "action": "leave a text box or the marked text, close a box or this list"},
    ]
    if task is not None and task["span_target"] and keys["mark"]:
        noun = task["span_noun"]
        rows += [
            {"keys": ["Tab"], "action": f"to the {noun} text: then ← → move word by word"},
            {"keys": ["Shift+←", "Shift+→"], "action": f"select words of the {noun}"},
            {"keys": [keys["mark"]], "action": f"mark the selected words of the {noun} as a span"},
            {"keys": ["Delete"], "action": "remove the span under the cursor"},
        ]
    actions = ("skip", "flag", "unsure", "undo") if item_actions else ("undo",)
    rows += [{"keys": [keys[name]], "action": ACTION_WORDS[name]} for name in actions if keys[name]]
    rows.append({"keys": ["?"], "action": "show or hide this list"})
    return rows


def qualification_checkpoint(study: Study, annotator) -> dict | None:
    """The result page an annotator sees between a failed qualification attempt and the retry
    they may start ("Try again"), or None when there is no such pause: the round is not
    required, passed, under way, not yet started, or lost (a refusal then says so)."""
    state = qualification_state(study, annotator)
    if state.status != QualificationStatus.READY or state.last is None:
        return None
    payload = state.payload()
    return {**payload, "attempts_left": state.attempts_allowed - state.attempts_made}


def qualification_outcome(submission) -> dict | None:
    """When `submission` answered the last question of a qualification attempt: whether it
    passed and the message that says so ({"passed", "message"}); else None."""
    answer = submission.qualification_answer
    if answer is None or not submission.created:
        return None
    attempt = answer.attempt
    attempt.refresh_from_db()
    if attempt.finished_at is None:
        return None
    score = f"{attempt.correct} of {attempt.total} correct"
    if attempt.passed:
        return {"passed": True, "message": f"You passed the qualification round ({score}). Formal work starts now."}
    return {"passed": False, "message": f"You did not pass qualification attempt {attempt.number} ({score})."}


def annotator_studies(annotator) -> list[dict]:
    """The open studies this annotator may see, each with their progress, whether they have an
    item claimed (so the page says Continue rather than Start), why they may not work on it and
    how many peer reviews wait for them."""
    studies = list(studies_open_to(annotator))
    claimed = set(
        Assignment.objects.filter(
            annotator=annotator, state=Assignment.State.ACTIVE, item__study__in=studies
        ).values_list("item__study", flat=True)
    )
    reviews = Counter(
        PeerReview.objects.filter(
            reviewer=annotator, verdict__isnull=True, judgment__voided=False, judgment__item__study__in=studies
        ).values_list("judgment__item__study", flat=True)
    )
    rows = []
    for study in studies:
        progress = annotator_progress(study, annotator)
        rows.append(
            {
                "study": study,
                "progress": progress,
                "started": progress["done"] > 0 or study.pk in claimed,
                "finished": progress["total"] > 0 and progress["done"] >= progress["total"],
                "refusal": annotator_refusal(study, annotator),
                "reviews": reviews.get(study.pk, 0),
            }
        )
    return rows


def staff_studies() -> list[dict]:
    """Every study with its judgment progress: counted (not voided) judgments out of the number
    needed (items x judgments per item)."""
    studies = Study.objects.select_related("collection").annotate(
        item_count=Count("items", distinct=True),
        judgment_count=Count("items__judgments", filter=Q(items__judgments__voided=False), distinct=True),
    )
    return [
        {
            "study": study,
            "items": study.item_count,
            "done": study.judgment_count,
            "needed": study.item_count * study.judgments_per_item,
        }
        for study in studies
    ]


def staff_study_summary(study: Study) -> dict:
    """`study_overview` plus the number of judgments the study needs in all."""
    overview = study_overview(study)
    return {**overview, "needed": overview["items"] * study.judgments_per_item}


def staff_study_items(study: Study, items: Sequence[Item]) -> list[dict]:
    """`items` of the study (one page of them, in order), for staff: query id, role (hidden gold
    and qualification items marked, with their known answer), the gold's option number,
    candidate texts and every judgment (voided ones flagged) with the option chosen or the
    answer given. Reads a page at a time: a study may have 100K items."""
    schema = study_schema(study)
    item_ids = [item.pk for item in items]
    judgments_by_item = defaultdict(list)
    for judgment in (
        Judgment.objects.filter(item_id__in=item_ids)
        .select_related("annotator", "choice", "voided_by")
        .order_by("submitted_at", "pk")
    ):
        judgments_by_item[judgment.item_id].append(
            {
                "judgment": judgment,
                "option": judgment.choice.position + 1 if judgment.choice else None,
                "answer": describe_answer(study, schema, label=judgment.label, selections=judgment.selections),
                "correct": judgment.choice.is_gold if judgment.choice and study.kind == Study.Kind.PROXY else None,
            }
        )
    candidates_by_item = defaultdict(list)
    for candidate in (
        ItemCandidate.objects.filter(item_id__in=item_ids)
        .select_related("passage", "source_run")
        .order_by("item_id", "position")
    ):
        candidates_by_item[candidate.item_id].append(candidate)
    rows = []
    for item in items:
        candidates = candidates_by_item[item.pk]
        rows.append(
            {
                "item": item,
                "expected": None if item.expected_label is None else _describe_key(study, schema, item.expected_label),
                "candidates": candidates,
                "gold_option": next((c.position + 1 for c in candidates if c.is_gold), None),
                "judgments": judgments_by_item[item.pk],
                "counted": sum(1 for row in judgments_by_item[item.pk] if not row["judgment"].voided),
            }
        )
    return rows


# --- quality control pages -------------------------------------------------------------------------


# How the quality page words an annotator's qualification status.
QUALIFICATION_WORDS = {
    QualificationStatus.NOT_REQUIRED: "—",
    QualificationStatus.NOT_READY: "no questions yet",
    QualificationStatus.READY: "not started / may retry",
    QualificationStatus.IN_PROGRESS: "in progress",
    QualificationStatus.PASSED: "passed",
    QualificationStatus.LOCKED_OUT: "failed (locked out)",
}


def quality_page(study: Study, measures: QualityMeasures | None = None) -> dict:
    """The staff quality page: quality_overview's per-annotator measures as table rows (shares
    as percentages), each with their open flags (to resolve) and their block, if any."""
    overview = quality_overview(study, measures)
    flags = defaultdict(list)
    for flag in AnnotatorFlag.objects.filter(study=study, resolved_at__isnull=True).select_related("annotator"):
        flags[flag.annotator.username].append(flag)
    blocks = {
        block.annotator.username: block
        for block in StudyBlock.objects.filter(study=study).select_related("annotator", "created_by")
    }
    rows = [
        {
            "username": username,
            **measures,
            "gold_percent": _percent(measures["gold"]),
            "peer_percent": _percent(measures["peer_review"]),
            "qualification_text": QUALIFICATION_WORDS.get(measures["qualification"], measures["qualification"]),
            "flags": flags.get(username, []),
            "block": blocks.get(username),
        }
        for username, measures in overview["annotators"].items()
    ]
    return {**overview, "rows": rows}


def _percent(rate: dict | None) -> float | None:
    return None if rate is None or rate["rate"] is None else 100 * rate["rate"]


def describe_answer(study: Study, schema: dict, *, position=None, label=None, selections=None) -> str:
    """An answer in the words of the page: "option 2", "paragraphs 1, 3", "2 · Highly relevant"."""
    if study.kind == Study.Kind.PROXY:
        return "—" if position is None else f"option {position + 1}"
    if study.kind == Study.Kind.PREFERENCE:
        return describe_preference(label)
    if schema["multi_select"]:
        chosen = list(selections or [])
        return (
            f"paragraph{'s' if len(chosen) > 1 else ''} " + ", ".join(str(p + 1) for p in chosen)
            if chosen
            else "none selected"
        )
    if label is None:
        return "—"
    name = schema["value_labels"].get(str(label), str(label))
    return str(label) if name == str(label) else f"{label} · {name}"


def _describe_key(study: Study, schema: dict, key) -> str:
    """An answer key (a position, a label or a list of positions) in words."""
    if study.kind == Study.Kind.PROXY:
        return describe_answer(study, schema, position=key)
    if schema["multi_select"]:
        return describe_answer(study, schema, selections=key)
    return describe_answer(study, schema, label=key)


# The keys of the peer-review verdicts.
VERDICT_KEYS = {"pass": "p", "fail": "f"}
# Every shortcut of the peer-review page, for the list the `?` key opens.
REVIEW_SHORTCUTS = [
    {"keys": [VERDICT_KEYS["pass"]], "action": "the answer is correct"},
    {"keys": [VERDICT_KEYS["fail"]], "action": "the answer is incorrect"},
    {"keys": ["Tab", "Shift+Tab"], "action": "go to the next or previous field, button or link"},
    {"keys": ["Enter"], "action": "submit the verdict"},
    {"keys": ["Ctrl+Enter"], "action": "submit from the comment box"},
    {"keys": ["Esc"], "action": "leave the comment box, close this list"},
    {"keys": ["?"], "action": "show or hide this list"},
]


def peer_review_page(payload: dict, study: Study) -> dict:
    """next_peer_review's payload as the review page lays it out: the item as the annotator saw
    it, the reviewed answer in words (chosen candidates marked, spans highlighted in their
    text, rubric values named), and the keyed verdicts. Nothing says whose answer it is."""
    if payload["finished"]:
        return payload
    schema = study_schema(study)
    answer = payload["answer"]
    item = _shown_item(payload)
    chosen = {answer["position"]} if answer["position"] is not None else set(answer["selections"] or [])
    candidates = [
        {**candidate, "chosen": candidate["position"] in chosen}
        for candidate in keyed_candidates(payload["candidates"])
    ]
    if study.kind != Study.Kind.PROXY and not schema["multi_select"]:
        candidates = candidates[:1]
    spans_by_target = defaultdict(list)
    for span in answer["spans"] or []:
        spans_by_target[span["target"]].append(span)
    query_text = span_target_text(study, item, "query")
    rubric_names = {field["name"]: field["labels"] for field in schema.get("rubric", [])}
    return {
        **payload,
        "query_title": payload.get("query_title", ""),
        "query_segments": marked_segments(query_text, spans_by_target["query"]),
        "candidates": [
            {**candidate, "segments": marked_segments(candidate["text"], spans_by_target["passage"])}
            for candidate in candidates
        ],
        "answer_text": describe_answer(
            study, schema, position=answer["position"], label=answer["label"], selections=answer["selections"]
        ),
        "rubric": [
            {
                "title": name.replace("_", " ").capitalize(),
                "value": value,
                "label": rubric_names.get(name, {}).get(str(value), str(value)),
            }
            for name, value in (answer["rubric"] or {}).items()
        ],
        "rationale": answer["rationale"],
        "marked_spans": bool(answer["spans"]),
        "shortcuts": REVIEW_SHORTCUTS,
        "verdicts": [
            {"value": value, "label": label, "key": VERDICT_KEYS[value]} for value, label in PeerReview.Verdict.choices
        ],
    }


def marked_segments(text: str, spans: list[dict]) -> list[dict]:
    """`text` cut at the spans' character offsets: [{"text", "marked"}, ...] in order."""
    segments, cursor = [], 0
    for span in sorted(spans, key=lambda span: span["start"]):
        start, end = max(span["start"], cursor), span["end"]
        if start >= end:
            continue
        if start > cursor:
            segments.append({"text": text[cursor:start], "marked": False})
        segments.append({"text": text[start:end], "marked": True})
        cursor = end
    if cursor < len(text):
        segments.append({"text": text[cursor:], "marked": False})
    return segments
