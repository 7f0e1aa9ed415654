"""Quality control for studies of every kind: items with known answers (qualification questions
and hidden gold), per-annotator measures and the flags they raise, blocking, peer review and
adjudication. Qualification rounds themselves live in `qualification.py`; the queue in `queue.py`.

Decisions, in one place:
- Hidden gold items are ordinary items whose role is "gold": `designate_items` turns existing
  work items with a known answer into gold (or qualification) items, picked by a seeded draw, so
  their positions and ids are spread among the others (never appended last). The queue serves
  them like any item (by need, then position), hence at about the gold share of every
  annotator's stream; `designate_gold_share` designates ceil(gold_rate x formal items).
- Judgments of gold items are stored like any other but never counted in agreement statistics
  (`counted_judgments`); they give each annotator's gold accuracy (`gold_accuracy`).
- Flags are computed when staff look (`refresh_flags`, called by the staff API, the staff page
  and `study_quality --refresh-flags`): one pass over the study's judgments, nothing added to an
  annotator's submission. A measure needs MIN_FLAG_EVIDENCE observations (gold judgments, timed
  judgments, reviews) before it can flag. An open flag is updated, never duplicated; a flag staff
  resolved is raised again only when new evidence arrived since.
- Blocking (`block_annotator`) ends the annotator's claims in the study, withdraws the peer
  reviews waiting for them and resolves their open flags (staff have acted).
- Peer review samples ceil(peer_review_rate x counted judgments) of each annotator (topped up
  on later calls) and gives each to the least-loaded other eligible annotator, preferring one
  who did not judge the item, but never one who may still be asked to judge it (the queue then
  never serves it to them either). Reviewers see the item and the answer, nothing else.
- Adjudications are staff's final answers for disagreement items; staff may revise one at any
  time (the latest decision stands, with who made it and when), open or closed study alike,
  since adjudicating usually happens after annotation closes.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from retrieval.chunks import chunks
from retrieval.errors import InputError

from ..events import annotator_flagged
from ..models import (
    TIME_TAKEN,
    Adjudication,
    AnnotatorFlag,
    Assignment,
    Item,
    ItemCandidate,
    Judgment,
    PeerReview,
    QualificationAttempt,
    Study,
    StudyBlock,
)
from ..provenance import answer_column
from ..selectors import (
    answer_fields,
    counted_judgments,
    counted_judgments_by_copies,
    gold_judgments,
    median_seconds,
    median_seconds_by_annotator,
    shown_item,
)
from .labels import is_correct, study_schema, validate_answer, validate_expected
from .live_counts import agreement_column
from .qualification import qualification_state
from .queue import AnnotationForbidden, annotator_refusal, items_still_to_judge

# Fewer observations than this say too little about an annotator to flag them.
MIN_FLAG_EVIDENCE = 3
DESIGNATABLE_ROLES = (Item.Role.GOLD, Item.Role.QUALIFICATION)


class Rate(NamedTuple):
    """`hits` of `total` (correct gold answers, passed reviews); rate None when total is 0."""

    hits: int
    total: int
    rate: float | None


def _rate(hits: int, total: int) -> Rate:
    return Rate(hits, total, hits / total if total else None)


def share_of(rate: float, count: int) -> int:
    """ceil(rate x count), without float noise: 0.28 x 25 is 7.000000000000001 in floats, and
    must give 7 items, not 8."""
    return math.ceil(round(rate * count, 9))


# --- items with known answers ------------------------------------------------------------------


def _refuse_preference(study: Study, what: str) -> None:
    """Preference answers have no right answer to check or decide: refuse the actions that need one."""
    if study.kind == Study.Kind.PREFERENCE:
        raise InputError(f"study {study.pk} is a preference study: {what}", field="study")


def designate_items(
    study: Study,
    role: str,
    *,
    count: int | None = None,
    items: Iterable[Item] | None = None,
    expected: dict[int, object] | None = None,
    seed: int | None = None,
) -> list[Item]:
    """Turn work items into gold or qualification items, in one transaction.

    Either `count` items drawn with a seeded RNG (the study seed unless `seed` is given) among
    the work items that have a known answer (a gold candidate; for label kinds an
    expected_label), or the given `items`, with `expected` answers (item id -> label, or the
    list of right positions for multi-select) for label kinds. Only items nobody has judged or
    claimed can change role, so no judgment moves in or out of the statistics. Raises InputError
    naming the field when the request cannot be met.
    """
    if role not in DESIGNATABLE_ROLES:
        raise InputError(f"must be one of {', '.join(DESIGNATABLE_ROLES)}, got {role!r}", field="role")
    _refuse_preference(study, "gold and qualification items need a known answer")
    if (count is None) == (items is None):
        raise InputError("give either a number of items to draw or the items themselves", field="count")
    expected = expected or {}
    with transaction.atomic():
        chosen = _draw_items(study, role, count, seed) if items is None else _given_items(study, list(items), expected)
        for item in chosen:
            item.role = role
            if item.pk in expected:
                item.expected_label = validate_expected(study, item, expected[item.pk])
            item.save(update_fields=["role", "expected_label"])
    return chosen


def designate_gold_share(study: Study, *, seed: int | None = None) -> list[Item]:
    """Designate hidden gold items up to ceil(gold_rate x formal items) (work and gold items;
    qualification questions are not part of formal work). Returns the newly designated ones."""
    formal = study.items.exclude(role=Item.Role.QUALIFICATION)
    wanted = share_of(study.gold_rate, formal.count()) - formal.filter(role=Item.Role.GOLD).count()
    if wanted <= 0:
        return []
    try:
        return designate_items(study, Item.Role.GOLD, count=wanted, seed=seed)
    except InputError as exc:
        raise InputError(exc.message, field="gold_rate") from exc


def _untouched_work_items(study: Study):
    return (
        Item.objects.filter(study=study, role=Item.Role.WORK)
        .exclude(pk__in=Judgment.objects.filter(item__study=study).values("item"))
        .exclude(pk__in=Assignment.objects.filter(item__study=study, state=Assignment.State.ACTIVE).values("item"))
        .order_by("position")
    )


def _draw_items(study: Study, role: str, count: int, seed: int | None) -> list[Item]:
    if count < 1:
        raise InputError(f"must be at least 1, got {count}", field="count")
    candidates = _untouched_work_items(study)
    if study.kind == Study.Kind.PROXY:
        candidates = candidates.filter(candidates__is_gold=True).distinct()
    else:
        candidates = candidates.filter(expected_label__isnull=False)
    candidates = list(candidates)
    if len(candidates) < count:
        raise InputError(
            f"only {len(candidates)} unjudged work items have a known answer; {count} asked for {role}",
            field="count",
        )
    chosen = random.Random(f"{study.seed if seed is None else seed}:{role}").sample(candidates, count)
    return sorted(chosen, key=lambda item: item.position)


def _given_items(study: Study, items: list[Item], expected: dict) -> list[Item]:
    untouched = set(_untouched_work_items(study).values_list("pk", flat=True))
    for item in items:
        if item.study_id != study.pk:
            raise InputError(f"item {item.pk} is not part of study {study.pk}", field="items")
        if item.pk not in untouched:
            raise InputError(f"item {item.pk} is not an unjudged work item", field="items")
        known = item.pk in expected or (
            item.candidates.filter(is_gold=True).exists()
            if study.kind == Study.Kind.PROXY
            else item.expected_label is not None
        )
        if not known:
            raise InputError(f"item {item.pk} has no known answer; give its expected answer", field="expected")
    return items


# --- per-annotator measures --------------------------------------------------------------------


def gold_accuracy(study: Study) -> dict[str, Rate]:
    """Each annotator's share of correct answers on hidden gold items (username -> Rate)."""
    tallies: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for judgment in gold_judgments(study).select_related("item__study"):
        tally = tallies[judgment.annotator.username]
        tally[0] += is_correct(judgment.item, judgment) is True
        tally[1] += 1
    return {username: _rate(*tally) for username, tally in sorted(tallies.items())}


def judgment_seconds(seconds: float | None, server_seconds: float | None) -> float | None:
    """The time a judgment took: what the client measured, else what the server saw."""
    return seconds if seconds is not None else server_seconds


@dataclass(frozen=True)
class Speeds:
    study_median: float | None
    medians: dict[str, float]  # username -> median seconds
    counts: dict[str, int]  # username -> timed judgments
    counted: dict[str, int]  # username -> counted judgments, timed or not (the overview's column)


def speeds(study: Study) -> Speeds:
    """Median seconds per annotator and over the whole study, over counted judgments (a
    judgment's time: the client's, else the server's), each exact and found by the database
    (annotation.selectors.median_seconds), with each annotator's counted judgments: one grouped
    pass counts both, and the timed counts add up to the study's."""
    counted = counted_judgments_by_copies(study)
    seconds = TIME_TAKEN  # as indexed (Judgment.Meta): the medians walk the index
    per_annotator = (
        counted.alias(timed_seconds=seconds)
        .values_list("annotator_id")
        .annotate(judgments=Count("pk"), timed=Count("pk", filter=Q(timed_seconds__isnull=False)))
        .values_list("annotator_id", "judgments", "timed")
    )
    judgments, timed = {}, {}
    for annotator_id, judgment_count, timed_count in per_annotator:
        judgments[annotator_id], timed[annotator_id] = judgment_count, timed_count
    medians = median_seconds_by_annotator(counted, seconds, timed)
    usernames = dict(get_user_model().objects.filter(pk__in=judgments).values_list("pk", "username"))
    by_name = sorted((usernames[annotator_id], median) for annotator_id, median in medians.items())
    study_median = median_seconds(counted, seconds, sum(timed.values()))
    return Speeds(
        study_median.value if study_median else None,
        {username: median.value for username, median in by_name},
        {username: median.count for username, median in by_name},
        {usernames[annotator_id]: count for annotator_id, count in sorted(judgments.items())},
    )


def peer_pass_rates(study: Study) -> dict[str, Rate]:
    """Each annotator's share of reviewed judgments that peers passed (username -> Rate);
    reviews of voided judgments are left out."""
    tallies: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    reviews = PeerReview.objects.filter(
        judgment__study=study, judgment__voided=False, verdict__isnull=False
    ).values_list("judgment__annotator__username", "verdict")
    for username, verdict in reviews:
        tallies[username][0] += verdict == PeerReview.Verdict.PASS
        tallies[username][1] += 1
    return {username: _rate(*tally) for username, tally in sorted(tallies.items())}


# --- flags -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QualityMeasures:
    """What the automatic flags and the quality overview are computed from. The staff page
    refreshes the flags and then shows the overview: it reads these once for both (at 100K
    items each is a pass over every judgment)."""

    gold: dict[str, Rate]
    peer: dict[str, Rate]
    speed: Speeds


def quality_measures(study: Study) -> QualityMeasures:
    return QualityMeasures(gold=gold_accuracy(study), peer=peer_pass_rates(study), speed=speeds(study))


@dataclass(frozen=True)
class _Finding:
    username: str
    reason: str
    value: float
    threshold: float
    evidence: int  # observations behind the value
    details: dict


def _findings(study: Study, min_evidence: int, measures: QualityMeasures) -> list[_Finding]:
    findings = []
    for username, rate in measures.gold.items():
        if rate.total >= min_evidence and rate.rate < study.gold_accuracy_threshold:
            findings.append(
                _Finding(
                    username,
                    AnnotatorFlag.Reason.LOW_GOLD_ACCURACY,
                    rate.rate,
                    study.gold_accuracy_threshold,
                    rate.total,
                    {"correct": rate.hits, "gold_judgments": rate.total},
                )
            )
    speed = measures.speed
    if speed.study_median:
        limit = study.fast_fraction * speed.study_median
        for username, median in speed.medians.items():
            if speed.counts[username] >= min_evidence and median < limit:
                findings.append(
                    _Finding(
                        username,
                        AnnotatorFlag.Reason.TOO_FAST,
                        median,
                        limit,
                        speed.counts[username],
                        {
                            "median_seconds": median,
                            "study_median_seconds": speed.study_median,
                            "fast_fraction": study.fast_fraction,
                            "judgments": speed.counts[username],
                        },
                    )
                )
    for username, rate in measures.peer.items():
        if rate.total >= min_evidence and rate.rate < study.peer_pass_target:
            findings.append(
                _Finding(
                    username,
                    AnnotatorFlag.Reason.LOW_PEER_PASS_RATE,
                    rate.rate,
                    study.peer_pass_target,
                    rate.total,
                    {"passed": rate.hits, "reviewed": rate.total},
                )
            )
    return findings


def refresh_flags(
    study: Study, *, min_evidence: int = MIN_FLAG_EVIDENCE, measures: QualityMeasures | None = None
) -> dict:
    """Raise open flags for annotators below the study's gold-accuracy threshold, faster than
    fast_fraction x the study's median seconds, or below the peer pass target (each with at
    least `min_evidence` observations). Idempotent: an open flag is updated in place; a resolved
    one comes back only when its evidence has grown since staff resolved it.
    Returns {"created": n, "updated": n, "open": n}."""
    findings = _findings(study, min_evidence, measures or quality_measures(study))
    users = {
        user.username: user
        for user in get_user_model().objects.filter(username__in={finding.username for finding in findings})
    }
    created = updated = 0
    for finding in findings:
        annotator = users[finding.username]
        flags = AnnotatorFlag.objects.filter(study=study, annotator=annotator, reason=finding.reason)
        details = {**finding.details, "evidence": finding.evidence}
        fields = {"value": finding.value, "threshold": finding.threshold, "details": details}
        if flags.filter(resolved_at__isnull=True).update(**fields):
            updated += 1
            continue
        latest = flags.order_by("-resolved_at").first()
        if latest is not None and latest.details.get("evidence", 0) >= finding.evidence:
            continue  # staff already judged this very evidence
        try:
            with transaction.atomic():
                flag = AnnotatorFlag.objects.create(study=study, annotator=annotator, reason=finding.reason, **fields)
                annotator_flagged.send(sender=AnnotatorFlag, flag=flag)
            created += 1
        except IntegrityError:
            updated += 1  # a concurrent refresh raised the same flag
    open_flags = AnnotatorFlag.objects.filter(study=study, resolved_at__isnull=True).count()
    return {"created": created, "updated": updated, "open": open_flags}


def resolve_flag(flag: AnnotatorFlag, *, by) -> AnnotatorFlag:
    """Staff have looked at the flag (and acted, or decided not to). Resolving twice keeps the
    first resolution."""
    AnnotatorFlag.objects.filter(pk=flag.pk, resolved_at__isnull=True).update(
        resolved_at=timezone.now(), resolved_by=by
    )
    flag.refresh_from_db()
    return flag


# --- blocking ----------------------------------------------------------------------------------


def block_annotator(study: Study, annotator, *, by, reason: str, exclude_judgments: bool = True) -> StudyBlock:
    """Stop `annotator` working on `study` and, with exclude_judgments, leave their judgments
    out of its statistics (they stay stored; unblocking counts them again). Their claims end,
    peer reviews waiting for them are withdrawn, and their open flags are resolved. Blocking
    again updates the reason and the exclusion."""
    if not reason or not reason.strip():
        raise InputError("a reason is required to block an annotator", field="reason")
    with transaction.atomic():
        block, _ = StudyBlock.objects.update_or_create(
            study=study,
            annotator=annotator,
            defaults={"reason": reason.strip(), "exclude_judgments": exclude_judgments, "created_by": by},
        )
        Assignment.objects.filter(item__study=study, annotator=annotator, state=Assignment.State.ACTIVE).update(
            state=Assignment.State.EXPIRED
        )
        PeerReview.objects.filter(judgment__item__study=study, reviewer=annotator, verdict__isnull=True).delete()
        AnnotatorFlag.objects.filter(study=study, annotator=annotator, resolved_at__isnull=True).update(
            resolved_at=timezone.now(), resolved_by=by
        )
    return block


def unblock_annotator(study: Study, annotator) -> bool:
    """Let the annotator work on the study again (their judgments count again); False when they
    were not blocked from it."""
    deleted, _ = StudyBlock.objects.filter(study=study, annotator=annotator).delete()
    return bool(deleted)


# --- peer review -------------------------------------------------------------------------------


def eligible_reviewers(study: Study) -> list:
    """Annotators who may review in the study: its listed annotators (or, when it lists nobody,
    everyone who judged in it) that may work on it (active, not blocked, qualified)."""
    if study.annotators.exists():
        people = study.annotators.all()
    else:
        people = get_user_model().objects.filter(pk__in=Judgment.objects.filter(item__study=study).values("annotator"))
    return [
        person
        for person in people.order_by("pk")
        if annotator_refusal(study, person) is None and qualification_state(study, person).qualified
    ]


def sample_for_peer_review(study: Study, *, seed: int | None = None) -> dict:
    """Assign ceil(peer_review_rate x n) of each annotator's n counted judgments for review by
    another annotator (never themselves, never someone who may not work on the study, never
    someone who may still be asked to judge the item: seeing an answer first would bias theirs),
    topping up what earlier calls sampled. Seeded: the same call on the same data assigns the same.
    Returns {"assigned": n, "unassigned": n (no eligible reviewer), "reviews": n}."""
    _refuse_preference(study, "peer review is not offered")
    if study.peer_review_rate <= 0:
        raise InputError("the study's peer review rate is 0; set it first", field="peer_review_rate")
    rng = random.Random(f"{study.seed if seed is None else seed}:peer-review")
    reviewers = eligible_reviewers(study)
    rng.shuffle(reviewers)  # ties in load go to a seeded order, not to the oldest account
    still_to_judge = {reviewer.pk: items_still_to_judge(study, reviewer) for reviewer in reviewers}
    load = Counter(PeerReview.objects.filter(judgment__item__study=study).values_list("reviewer_id", flat=True))
    judged = set(Judgment.objects.filter(item__study=study).values_list("item_id", "annotator_id"))
    sampled = set(PeerReview.objects.filter(judgment__item__study=study).values_list("judgment_id", flat=True))
    by_author: dict[int, list[Judgment]] = defaultdict(list)
    for judgment in counted_judgments(study).order_by("pk"):
        by_author[judgment.annotator_id].append(judgment)
    assigned = unassigned = 0
    with transaction.atomic():
        for author_id in sorted(by_author):
            judgments = by_author[author_id]
            wanted = share_of(study.peer_review_rate, len(judgments))
            fresh = [judgment for judgment in judgments if judgment.pk not in sampled]
            missing = wanted - (len(judgments) - len(fresh))
            for judgment in rng.sample(fresh, max(0, min(missing, len(fresh)))):
                others = [
                    reviewer
                    for reviewer in reviewers
                    if reviewer.pk != author_id and judgment.item_id not in still_to_judge[reviewer.pk]
                ]
                if not others:
                    unassigned += 1
                    continue
                reviewer = min(others, key=lambda person: ((judgment.item_id, person.pk) in judged, load[person.pk]))
                PeerReview.objects.create(judgment=judgment, reviewer=reviewer)
                load[reviewer.pk] += 1
                assigned += 1
    reviews = PeerReview.objects.filter(judgment__item__study=study).count()
    return {"assigned": assigned, "unassigned": unassigned, "reviews": reviews}


def _pending_reviews(study: Study, reviewer):
    return PeerReview.objects.filter(
        judgment__item__study=study, judgment__voided=False, reviewer=reviewer, verdict__isnull=True
    ).order_by("assigned_at", "pk")


def next_peer_review(study: Study, reviewer) -> dict:
    """The reviewer's oldest pending review in the study: the item as annotators see it and the
    answer to review; `{"finished": true}` when none is waiting."""
    refusal = annotator_refusal(study, reviewer)
    if refusal:
        raise AnnotationForbidden(refusal)
    pending = _pending_reviews(study, reviewer)
    review = pending.select_related("judgment__item__study", "judgment__item__query", "judgment__choice").first()
    if review is None:
        return {"finished": True, "study": study.pk, "review": None, "pending": 0}
    return {
        "finished": False,
        "review": review.pk,
        **shown_item(review.judgment.item),
        "answer": answer_fields(review.judgment),
        "pending": pending.count(),
    }


@dataclass(frozen=True)
class ReviewSubmission:
    review: PeerReview
    created: bool  # False: already reviewed; the first verdict stands


def submit_peer_review(review: PeerReview, *, reviewer, verdict: str, comment: str = "") -> ReviewSubmission:
    """Record the reviewer's verdict (pass or fail) on a review assigned to them. A verdict is
    final: a second submission returns the first."""
    if review.reviewer_id != reviewer.pk:
        raise AnnotationForbidden("this review is assigned to someone else")
    study = review.judgment.item.study
    refusal = annotator_refusal(study, reviewer)
    if refusal:
        raise AnnotationForbidden(refusal)
    if verdict not in PeerReview.Verdict.values:
        raise InputError(f"must be one of {', '.join(PeerReview.Verdict.values)}, got {verdict!r}", field="verdict")
    comment = (comment or "").strip()
    with transaction.atomic():
        review = PeerReview.objects.select_for_update().get(pk=review.pk)
        if review.verdict is not None:
            return ReviewSubmission(review, created=False)
        review.verdict, review.comment, review.reviewed_at = verdict, comment, timezone.now()
        review.save(update_fields=["verdict", "comment", "reviewed_at"])
    return ReviewSubmission(review, created=True)


# --- adjudication ------------------------------------------------------------------------------


def _disputed(study: Study):
    """The ids of the work items whose counted judgments disagree (different choices, selections
    or labels; on a scale, a range above 0), as a subquery. Counted judgments are the live ones
    unless an annotator's are excluded by a block: without such a block the items' stored count
    of different live answers says it (annotation.services.live_counts) and no judgment is read;
    with one, `_disputed_by_judgments`."""
    if not StudyBlock.objects.filter(study=study, exclude_judgments=True).exists():
        return Item.objects.filter(study=study, role=Item.Role.WORK, live_answers__gt=1).values("pk")
    return _disputed_by_judgments(study)


def _disputed_by_judgments(study: Study):
    """_disputed found in one pass over the counted judgments. Proxy answers are told apart by
    the chosen candidate's row (one per position of an item), which spares a join."""
    column = agreement_column(study)  # the stored count's column: both paths tell answers apart alike
    if column is None:  # a preference study: its answers are not compared item by item (live_answers 0)
        return Item.objects.none().values("pk")
    return (
        counted_judgments(study)
        .order_by()
        .values("item_id")
        .annotate(answers=Count(column, distinct=True))
        .filter(answers__gt=1)
        .values("item_id")
    )


def disputed_items(study: Study) -> list[int]:
    """The disputed work items' ids in study order. At 100K items (tens of thousands disputed),
    reading every answer into Python cost a page more than a second; pages build the rows of
    their own slice only (`disagreement_rows`). Preference studies list none: their
    disagreements are data (the scores weigh every answer), not errors to decide."""
    if study.kind == Study.Kind.PREFERENCE:
        return []
    return list(Item.objects.filter(pk__in=_disputed(study)).order_by("position").values_list("pk", flat=True))


def disagreement_rows(study: Study, item_ids: list[int]) -> list[dict]:
    """The disputed items `item_ids` in that order, with the answers' counts and any
    adjudication. Staff-only: proxy items name their gold position."""
    answers: dict[int, list] = defaultdict(list)
    gold_positions, adjudications, items = {}, {}, {}
    for chunk in chunks(item_ids):
        rows = (
            counted_judgments(study).order_by().filter(item_id__in=chunk).values_list("item_id", answer_column(study))
        )
        for item_id, answer in rows:
            answers[item_id].append(tuple(answer) if isinstance(answer, list) else answer)
        gold = ItemCandidate.objects.filter(item_id__in=chunk, is_gold=True)
        gold_positions.update(gold.values_list("item_id", "position"))
        decided = Adjudication.objects.filter(item_id__in=chunk).select_related("choice", "decided_by")
        adjudications.update((adjudication.item_id, adjudication) for adjudication in decided)
        items.update(
            (item_id, (position, query))
            for item_id, position, query in Item.objects.filter(pk__in=chunk).values_list(
                "pk", "position", "query__external_id"
            )
        )
    rows = []
    for item_id in item_ids:
        counts = Counter(answers[item_id])
        labels = [] if study.kind == Study.Kind.PROXY else [key for key in counts if isinstance(key, int)]
        position, query = items[item_id]
        rows.append(
            {
                "item": item_id,
                "position": position,
                "query": query,
                "gold_position": gold_positions.get(item_id),
                "judgments": sum(counts.values()),
                "answers": [
                    {"answer": list(key) if isinstance(key, tuple) else key, "count": count}
                    for key, count in sorted(counts.items(), key=lambda pair: (-pair[1], str(pair[0])))
                ],
                "range": max(labels) - min(labels) if labels else None,
                "adjudication": adjudication_payload(adjudications.get(item_id)),
            }
        )
    return rows


def disagreement_items(study: Study) -> list[dict]:
    """Every work item whose counted judgments disagree, in study order (`disagreement_rows`)."""
    return disagreement_rows(study, disputed_items(study))


def disagreement_counts(study: Study) -> tuple[int, int]:
    """(items disputed, of which adjudicated) as `disagreement_items` lists them: the quality
    overview needs only the numbers, so the database finds the disputed items once and no answer
    is read (building every disputed item's answers took most of its 3.9 s at 100K items)."""
    if study.kind == Study.Kind.PREFERENCE:
        return 0, 0
    disputed = _disputed(study)  # the study's items already
    adjudicated = Adjudication.objects.filter(item_id__in=disputed).count()
    return disputed.count(), adjudicated


def adjudication_payload(adjudication: Adjudication | None) -> dict | None:
    if adjudication is None:
        return None
    return {
        "position": adjudication.choice.position if adjudication.choice else None,
        "candidate": adjudication.choice_id,
        "label": adjudication.label,
        "selections": adjudication.selections,
        "reason": adjudication.reason,
        "note": adjudication.note,
        "decided_by": adjudication.decided_by.get_username() if adjudication.decided_by else None,
        "decided_at": adjudication.decided_at.isoformat(),
    }


def adjudicate(
    item: Item,
    *,
    by,
    candidate: ItemCandidate | None = None,
    position=None,
    label=None,
    selections=None,
    reason: str = "",
    note: str = "",
) -> Adjudication:
    """Staff's final answer for a work item: a candidate (or its position) for proxy items, a
    label, or the selected positions of a multi-select item, validated like any answer. One per
    item; deciding again replaces the answer, the reason (an entry of the study's error list,
    checked by annotation.services.adjudication), the note, who decided and when."""
    study = item.study
    _refuse_preference(study, "items are not adjudicated (every answer counts in the scores)")
    if item.role != Item.Role.WORK:
        raise InputError(
            f"item {item.pk} is a {item.role} item with a known answer; only work items are adjudicated", field="item"
        )
    if study.kind == Study.Kind.PROXY:
        fields = {
            "choice": validate_answer(study, item, candidate=candidate, position=position).choice,
            "label": None,
            "selections": [],
        }
    else:
        multi_select = study_schema(study)["multi_select"]
        field_name = "selections" if multi_select else "label"
        try:
            value = validate_expected(study, item, selections if multi_select else label)
        except InputError as exc:
            raise InputError(exc.message, field=field_name) from exc
        fields = {"choice": None, "label": None if multi_select else value, "selections": value if multi_select else []}
    adjudication, _ = Adjudication.objects.update_or_create(
        item=item,
        defaults={
            **fields,
            "reason": reason,
            "note": (note or "").strip(),
            "decided_by": by,
            "decided_at": timezone.now(),
        },
    )
    return adjudication


# --- overview ----------------------------------------------------------------------------------


def quality_overview(study: Study, measures: QualityMeasures | None = None) -> dict:
    """Staff's view of a study's quality in one object: settings, item roles, and per annotator
    their counted judgments, gold accuracy, median seconds, peer pass rate, qualification,
    block and open flags; plus disagreement and adjudication counts."""
    measures = measures or quality_measures(study)
    gold, peer, speed = measures.gold, measures.peer, measures.speed
    blocks = {
        block.annotator.username: block for block in StudyBlock.objects.filter(study=study).select_related("annotator")
    }
    flags = defaultdict(list)
    for username, reason in AnnotatorFlag.objects.filter(study=study, resolved_at__isnull=True).values_list(
        "annotator__username", "reason"
    ):
        flags[username].append(reason)
    people = (
        get_user_model()
        .objects.filter(
            Q(pk__in=Judgment.objects.filter(study=study).values("annotator"))
            | Q(pk__in=QualificationAttempt.objects.filter(study=study).values("annotator"))
            | Q(pk__in=StudyBlock.objects.filter(study=study).values("annotator"))
        )
        .order_by("username")
    )
    roles = dict(study.items.order_by().values_list("role").annotate(Count("pk")))
    disagreements, adjudicated = disagreement_counts(study)
    return {
        "study": study.pk,
        "kind": study.kind,
        "settings": {
            name: getattr(study, name)
            for name in (
                "qualification_threshold",
                "qualification_attempts",
                "gold_rate",
                "gold_accuracy_threshold",
                "fast_fraction",
                "peer_review_rate",
                "peer_pass_target",
            )
        },
        "items": {role: roles.get(role, 0) for role in Item.Role.values},
        "study_median_seconds": speed.study_median,
        "annotators": {
            person.username: {
                "counted_judgments": speed.counted.get(person.username, 0),
                "gold": _rate_payload(gold.get(person.username)),
                "median_seconds": speed.medians.get(person.username),
                "peer_review": _rate_payload(peer.get(person.username)),
                "qualification": qualification_state(study, person).status,
                "blocked": person.username in blocks,
                "judgments_excluded": person.username in blocks and blocks[person.username].exclude_judgments,
                "open_flags": sorted(flags.get(person.username, [])),
            }
            for person in people
        },
        "open_flags": sum(len(reasons) for reasons in flags.values()),
        "disagreements": disagreements,
        "adjudicated": adjudicated,
        "peer_reviews": PeerReview.objects.filter(judgment__study=study).aggregate(
            assigned=Count("pk"), pending=Count("pk", filter=Q(verdict__isnull=True))
        ),
    }


def _rate_payload(rate: Rate | None) -> dict | None:
    return None if rate is None else {"hits": rate.hits, "total": rate.total, "rate": rate.rate}
