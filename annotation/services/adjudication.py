"""The adjudication workspace's rules: who adjudicates, the queue and its order, the error list
adjudicators choose reasons from, decisions and sending items back for rework.

Decisions, in one place:
- Adjudicators are staff, or accounts with the permission `annotation.adjudicate` (given in the
  admin, to a user or a group). Such an account that is not staff reaches the workspace only
  (queue, items, decisions, send-backs, the reasons list) and sees annotators as A, B, C within
  each item, never their names, the gold, or the item's known answer; and only in studies it
  has no judgment in and could not be given work in (`work_standing` refuses it: not on the
  study's list of annotators, blocked from the study, scoped to other studies), whether the
  study is open or closed, so nobody adjudicates their own answers or judges an item after
  seeing others' answers to it. Staff keep an adjudicator out of an open-to-all study's
  annotation by blocking them there (keeping judgments) or by naming its annotators.
- The queue holds the study's work items with at least two counted judgments whose agreement
  (annotation.provenance) is below 1, plus a seeded sample of the agreed ones
  (`Study.adjudication_sample_rate`: ceil(rate x agreed items), those whose SHA-256 of
  "seed:adjudication-sample:item id" is smallest, so the same seed draws the same items whatever
  order they are read in), plus items back from rework with a new round of
  two or more judgments; ordered by agreement, lowest first, then study position. Decided items
  keep their place (with their decision); the workspace serves the first undecided one.
- The order is stored (AdjudicationQueue and its entries): reading every counted judgment to
  order them is too slow for each page at 100K items (18-41 s on a loaded 2-core machine), and
  in a study being judged a judgment lands every few seconds. So the queue follows the changes
  item by item (`follow_changes`): every writer of judgments marks its items in its own
  transaction (AdjudicationChange, annotation.services.live_counts), and the next view reads
  those items' counted judgments alone, replaces their entries and their rows among the agreed
  items (AgreedItem, each with its sample key), and redraws the sample from that index. An
  entry's rank is its agreement and position in one number (`queue_rank`), so no other entry
  moves when one comes or goes, and following gives exactly the entries a full build gives.
  It is built afresh (`build_queue`) only when there is none yet, or the study's seed or its
  excluded annotators changed; a new sample rate is followed like a change. An item's own page
  always reads its judgments afresh, and corrects (and marks) its entry when it changed since.
- Concurrency: following and building hold the queue's row lock (two staff opening the page at
  once follow one after the other; the second finds nothing left), and lock no item, so an
  annotator's submission never waits for them. A mark commits with its change, and the marks
  are read before the judgments and deleted by id, so a change committed during a follow is
  either read by it or left marked for the next. Writers that hold items and write entries (a
  send-back) take the queue's lock after their items, the order everyone follows.
- Reasons: each study uses its own list when staff gave it one, else the global list, else
  DEFAULT_REASONS. A decision on an item whose counted judgments disagree, and every send-back,
  needs a reason from the list; confirming an agreed item needs none. The reason is stored as
  its text, so editing the list later never rewrites a decision.
- Rework: sending an item back voids its judgments (kept, flagged "sent back for rework", no
  longer counted, their slots freed), withdraws its decision if it had one, and records both
  with the reason. The queue then serves the item to annotators again, judgments_per_item
  fresh slots, never to those who judged it before (one judgment per annotator and item, voided
  or not); once two of the new round are in, the item returns to the adjudication queue. No
  judgment is deleted or written twice. The data manager's bulk send-back
  (annotation.services.rework) goes through the same send_items_back, so a Rework is the one
  record of a send-back whichever page sent the item back.
- Preference studies have no queue and no item in the workspace: their disagreements are data
  (the Bradley-Terry scores weigh every answer), not errors to decide, as
  `quality.disagreement_items` lists none.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count, Max, QuerySet

from retrieval.bulk import insert_rows
from retrieval.errors import InputError
from retrieval.input_rules import check_text

from ..models import (
    Adjudication,
    AdjudicationChange,
    AdjudicationQueue,
    AdjudicationQueueEntry,
    AdjudicationReason,
    AgreedItem,
    Item,
    Judgment,
    Rework,
    Study,
    StudyBlock,
)
from ..provenance import agreement, answer_column, answer_scale, as_key
from ..selectors import counted_judgments
from .locks import lock_rows
from .quality import adjudicate, adjudication_payload, share_of
from .queue import annotator_refusal, void_in_bulk

ADJUDICATE_PERMISSION = "annotation.adjudicate"
DEFAULT_REASONS = ("Guideline gap", "Ambiguous item", "Annotator error", "Broken item")
MAX_REASONS = 12
MAX_REASON_LENGTH = 200
SENT_BACK_PREFIX = "sent back for rework"


class AdjudicationRefused(PermissionDenied):
    """The account may not adjudicate (in this study); pages and the API answer 403 with why."""


# --- who adjudicates ---------------------------------------------------------------------------


def is_adjudicator(user) -> bool:
    """Staff, or an active account with the adjudicate permission."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    return user.is_staff or user.has_perm(ADJUDICATE_PERMISSION)


def adjudicator_refusal(study: Study, user) -> str | None:
    """Why `user` may not adjudicate `study`, or None (see the module docstring)."""
    if not is_adjudicator(user):
        return "adjudicators and staff only"
    if user.is_staff:
        return None
    if Judgment.objects.filter(item__study=study, annotator=user).exists():
        return "you judged items of this study; someone else adjudicates it"
    if annotator_refusal(study, user) is None:
        return (
            "you may be given this study's items to judge; staff block you from annotating it "
            "(keeping judgments) or name its annotators before you adjudicate it"
        )
    return None


def require_adjudicator(study: Study, user) -> None:
    refusal = adjudicator_refusal(study, user)
    if refusal:
        raise AdjudicationRefused(refusal)


def adjudicable_studies(user) -> list[Study]:
    """The studies a non-staff adjudicator may adjudicate (their home page lists them)."""
    if not is_adjudicator(user) or user.is_staff:
        return []
    return [study for study in Study.objects.order_by("name") if adjudicator_refusal(study, user) is None]


# --- the error list ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Reasons:
    texts: list[str]
    scope: str  # "study": the study's own list; "global"; "default": none stored


def reasons(study: Study | None) -> Reasons:
    """The reasons adjudicators choose from in `study` (None: the global list)."""
    if study is not None:
        own = list(AdjudicationReason.objects.filter(study=study).order_by("position").values_list("text", flat=True))
        if own:
            return Reasons(own, "study")
    stored = list(
        AdjudicationReason.objects.filter(study__isnull=True).order_by("position").values_list("text", flat=True)
    )
    return Reasons(stored, "global") if stored else Reasons(list(DEFAULT_REASONS), "default")


def set_reasons(study: Study | None, texts: Iterable[str] | None) -> Reasons:
    """Replace the study's own list (None: the global list) with `texts`, in order; an empty or
    None list drops the study's own list (it then uses the global one) or resets the global
    list to DEFAULT_REASONS. Entries are trimmed; empty, repeated (ignoring case), overlong ones
    and more than MAX_REASONS are refused, naming the field `reasons`."""
    cleaned = _clean_reasons(texts or [])
    with transaction.atomic():
        AdjudicationReason.objects.filter(study=study).delete()  # study None: the global list
        AdjudicationReason.objects.bulk_create(
            [AdjudicationReason(study=study, text=text, position=n) for n, text in enumerate(cleaned)]
        )
    return reasons(study)


def _clean_reasons(texts: Iterable[str]) -> list[str]:
    cleaned, seen = [], set()
    for text in texts:
        if not isinstance(text, str):
            raise InputError(f"each reason is text, got {text!r}", field="reasons")
        text = check_text(" ".join(text.split()), field="reasons")
        if not text:
            raise InputError("a reason cannot be empty", field="reasons")
        if len(text) > MAX_REASON_LENGTH:
            raise InputError(f"a reason is at most {MAX_REASON_LENGTH} characters", field="reasons")
        if text.casefold() in seen:
            raise InputError(f"{text!r} is listed twice", field="reasons")
        seen.add(text.casefold())
        cleaned.append(text)
    if len(cleaned) > MAX_REASONS:
        raise InputError(f"at most {MAX_REASONS} reasons, got {len(cleaned)}", field="reasons")
    return cleaned


def require_reason(study: Study, reason: str | None, *, required: bool) -> str:
    """The reason as the study's list spells it, or "" when none is given and none is needed."""
    reason = " ".join((reason or "").split())
    if not reason:
        if required:
            raise InputError("choose a reason from the study's list", field="reason")
        return ""
    listed = reasons(study).texts
    match = next((text for text in listed if text.casefold() == reason.casefold()), None)
    if match is None:
        raise InputError(f"{reason!r} is not one of: {', '.join(listed)}", field="reason")
    return match


# --- the queue ---------------------------------------------------------------------------------

# A rank is the entry's agreement, in steps of 1 / RANK_AGREEMENT_STEPS (finer than anything but
# float rounding tells apart), times RANK_POSITIONS, plus its study position (a positive 32-bit
# integer): the largest rank is 2^63 - 1, the largest a database's big integer holds.
RANK_AGREEMENT_STEPS = 2**32 - 1
RANK_POSITIONS = 2**31
# Items read and written per statement while following changes (IN lists SQLite takes).
FOLLOW_CHUNK = 2000


def queue_rank(score: float, position: int) -> int:
    """The entry's place as one number: agreement, lowest first, then study position. Computed
    from the entry's own item alone, so a full build and following a change give the same rank,
    and no other entry moves when one comes or goes."""
    return round(score * RANK_AGREEMENT_STEPS) * RANK_POSITIONS + position


def sample_key(seed: int, item_id: int) -> str:
    """The item's place in the seeded draw of agreed items: smaller keys are drawn first."""
    return hashlib.sha256(f"{seed}:adjudication-sample:{item_id}".encode()).hexdigest()


def sampled_items(agreed: Iterable[int], rate: float, seed: int) -> set[int]:
    """ceil(rate x agreed) of the agreed items, those with the smallest sample keys (the rule
    `_draw_sample` follows in the database, from the keys AgreedItem stores)."""
    agreed = list(agreed)
    wanted = share_of(rate, len(agreed)) if rate > 0 else 0
    return set(sorted(agreed, key=lambda item_id: sample_key(seed, item_id))[:wanted])


def answers_agreement(answers: Counter, scale) -> float | None:
    """`agreement` over the answers in one fixed order: float sums depend on their order, and the
    same answers must give the same score however their rows were read (a full build, following
    one item, the item's own page)."""
    return agreement(dict(sorted(answers.items(), key=lambda pair: repr(pair[0]))), scale)


def item_agreements(study: Study, item_ids: Iterable[int] | None = None) -> dict[int, tuple[float | None, int]]:
    """item id -> (agreement, counted judgments) for every work item with a counted judgment
    (only those of `item_ids` when given), from the answers' counts per item (one grouped
    statement); none in a preference study."""
    if study.kind == Study.Kind.PREFERENCE:
        return {}
    column = answer_column(study)
    counts: dict[int, Counter] = defaultdict(Counter)
    judgments = counted_judgments(study)
    if item_ids is not None:
        judgments = judgments.filter(item_id__in=list(item_ids))
    rows = (
        judgments.order_by()
        .values("item_id", column)
        .annotate(given=Count("id"))
        .values_list("item_id", column, "given")
    )
    for item_id, answer, given in rows.iterator(10_000):
        counts[item_id][as_key(answer)] += given
    scale = answer_scale(study)
    return {item_id: (answers_agreement(answers, scale), sum(answers.values())) for item_id, answers in counts.items()}


def _excluded(study: Study) -> list[int]:
    return sorted(StudyBlock.objects.filter(study=study, exclude_judgments=True).values_list("annotator_id", flat=True))


def _newest_judgment() -> int:
    return Judgment.objects.aggregate(newest=Max("id"))["newest"] or 0


def _chunks(ids: list[int]) -> Iterable[list[int]]:
    for start in range(0, len(ids), FOLLOW_CHUNK):
        yield ids[start : start + FOLLOW_CHUNK]


def needs_build(queue: AdjudicationQueue, study: Study) -> bool:
    """Whether the stored queue must be built afresh: a new seed draws other agreed items, and
    other excluded annotators change the counted judgments of any number of items."""
    return queue.seed != study.seed or queue.excluded != _excluded(study)


def queue_follows(queue: AdjudicationQueue, study: Study) -> bool:
    """Whether the stored queue already follows the study: no item marked since (AdjudicationChange:
    a judgment added, voided, undone, revised or imported), no void flagged, the same sample rate.
    A newer judgment (of another study) only moves `last_judgment`, the newest judgment the
    entries are known to follow, forward."""
    if queue.stale or queue.sample_rate != study.adjudication_sample_rate:
        return False
    if AdjudicationChange.objects.filter(study=study).exists():
        return False
    newest = _newest_judgment()
    if newest > queue.last_judgment:
        AdjudicationQueue.objects.filter(pk=queue.pk, last_judgment=queue.last_judgment).update(last_judgment=newest)
        queue.last_judgment = newest
    return True


def current_queue(study: Study) -> AdjudicationQueue:
    """The study's queue, brought up to its judgments first: built afresh when there is none or
    its seed or exclusions changed, else following only the items marked since."""
    queue = AdjudicationQueue.objects.filter(study=study).first()
    if queue is None or needs_build(queue, study):
        return build_queue(study)
    if queue_follows(queue, study):
        return queue
    return follow_changes(study)


def _marks(study: Study) -> list[tuple[int, int]]:
    """The study's change marks as (mark id, item id), read before the judgments they mark: a
    mark commits with its change, so every change read here is in what is read after it."""
    return list(AdjudicationChange.objects.filter(study=study).values_list("pk", "item_id"))


def _forget(marks: list[tuple[int, int]]) -> None:
    """Delete exactly the marks that were read: one added meanwhile stays for the next time."""
    for chunk in _chunks([mark_id for mark_id, _ in marks]):
        AdjudicationChange.objects.filter(pk__in=chunk).delete()


ENTRY_COLUMNS = ("study_id", "item_id", "rank", "agreement", "judgments", "sampled", "reworked")
AGREED_COLUMNS = ("study_id", "item_id", "judgments", "sample_key")


def _place(study: Study, scores: dict, positions: dict[int, int], reworked: set[int]):
    """The entries and agreed items that scored items make (see the module docstring), as rows of
    ENTRY_COLUMNS and AGREED_COLUMNS: an item with two or more counted judgments is an entry when
    they disagree or it is back from rework, else an agreed item, which is an entry only when the
    sample draws it (`_draw_sample`)."""
    entries, agreed = [], []
    for item_id, (score, given) in scores.items():
        if given < 2:
            continue
        if score < 1 or item_id in reworked:
            rank = queue_rank(score, positions[item_id])
            entries.append((study.pk, item_id, rank, score, given, False, item_id in reworked))
        else:
            agreed.append((study.pk, item_id, given, bytes.fromhex(sample_key(study.seed, item_id))))
    return entries, agreed


def _replace(study: Study, scores: dict, positions: dict[int, int], reworked: set[int], items=None) -> list[tuple]:
    """Replace the entries and agreed items of `items` (every item of the study when None) with
    what their scores make now (`_place`); returns the entries' rows. The rows are inserted at the
    database's own speed: a build writes ~100K at 100K items, and model instances would cost most
    of its time."""
    entries, agreed = _place(study, scores, positions, reworked)
    for model in (AdjudicationQueueEntry, AgreedItem):
        stored = model.objects.filter(study=study)
        (stored if items is None else stored.filter(item_id__in=items)).delete()
    insert_rows(AdjudicationQueueEntry, ENTRY_COLUMNS, entries)
    insert_rows(AgreedItem, AGREED_COLUMNS, agreed)
    return entries


def _draw_sample(study: Study) -> int:
    """Bring the sampled entries to the draw the stored agreed items make now (ceil(rate x
    agreed) of them, smallest keys first, read from the index); how many are drawn. Entries of
    items the draw keeps are left as they are."""
    agreed = AgreedItem.objects.filter(study=study)
    rate = study.adjudication_sample_rate
    wanted = share_of(rate, agreed.count()) if rate > 0 else 0
    drawn = dict(agreed.order_by("sample_key").values_list("item_id", "judgments")[:wanted]) if wanted else {}
    entries = AdjudicationQueueEntry.objects.filter(study=study)
    held = set(entries.filter(sampled=True).order_by().values_list("item_id", flat=True))
    for chunk in _chunks(sorted(held - drawn.keys())):
        entries.filter(item_id__in=chunk).delete()
    for chunk in _chunks(sorted(drawn.keys() - held)):
        positions = Item.objects.filter(pk__in=chunk).values_list("pk", "position")
        rows = [
            (study.pk, item_id, queue_rank(1.0, position), 1.0, drawn[item_id], True, False)
            for item_id, position in positions
        ]
        insert_rows(AdjudicationQueueEntry, ENTRY_COLUMNS, rows)
    return len(drawn)


def build_queue(study: Study) -> AdjudicationQueue:
    """Order the study's queue afresh (see the module docstring) and store it, with its agreed
    items; every mark read first is then followed."""
    with transaction.atomic():
        queue, _ = AdjudicationQueue.objects.get_or_create(study=study)
        lock_rows(AdjudicationQueue.objects.filter(pk=queue.pk))
        newest = _newest_judgment()  # read first: a judgment after it is seen as new next time
        marks = _marks(study)
        scores = item_agreements(study)
        reworked = set(Rework.objects.filter(item__study=study).values_list("item_id", flat=True))
        # Every work item's position, rather than an IN list of tens of thousands (too long for SQLite).
        positions = dict(Item.objects.filter(study=study, role=Item.Role.WORK).values_list("pk", "position"))
        entries = _replace(study, scores, positions, reworked)
        queue.sampled = _draw_sample(study)
        _forget(marks)
        queue.last_judgment, queue.excluded, queue.stale = newest, _excluded(study), False
        queue.sample_rate, queue.seed = study.adjudication_sample_rate, study.seed
        queue.disputed = sum(agreement < 1 for _, _, _, agreement, *_ in entries)
        queue.save()
    return queue


def follow_changes(study: Study) -> AdjudicationQueue:
    """Bring the stored queue up to the study's judgments by reading only the items marked since
    (and redrawing the sample from the stored agreed items): the same entries, ranks and agreed
    items a full build gives, at the cost of the changes, not of the study. Under the queue's
    row lock, as a build: two staff opening the page at once follow the marks one after the
    other (the second finds none left). Item rows are never locked here, so an annotator's
    submission never waits for it; their marks, committed or not, are what the next view reads."""
    with transaction.atomic():
        lock_rows(AdjudicationQueue.objects.filter(study=study))
        queue = AdjudicationQueue.objects.get(study=study)
        if needs_build(queue, study):
            return build_queue(study)
        newest = _newest_judgment()
        marks = _marks(study)
        for chunk in _chunks(sorted({item_id for _, item_id in marks})):
            scores = item_agreements(study, chunk)
            positions = dict(Item.objects.filter(pk__in=chunk, role=Item.Role.WORK).values_list("pk", "position"))
            reworked = set(Rework.objects.filter(item_id__in=chunk).values_list("item_id", flat=True))
            _replace(study, scores, positions, reworked, chunk)
        followed = {
            "last_judgment": max(newest, queue.last_judgment),
            "stale": False,
            "sample_rate": study.adjudication_sample_rate,
            "sampled": _draw_sample(study),
            "disputed": AdjudicationQueueEntry.objects.filter(study=study, agreement__lt=1).count(),
        }
        _forget(marks)
        AdjudicationQueue.objects.filter(pk=queue.pk).update(**followed)  # built_at stays: not a build
        for field, value in followed.items():
            setattr(queue, field, value)
    return queue


def set_sample_rate(study: Study, rate: float) -> AdjudicationQueue:
    """Change the share of agreed items the queue samples, and redraw the sample."""
    if not 0 <= rate <= 1:
        raise InputError(f"must be between 0 and 1, got {rate}", field="sample_rate")
    Study.objects.filter(pk=study.pk).update(adjudication_sample_rate=rate)
    study.adjudication_sample_rate = rate
    return current_queue(study)


def queue_entries(study: Study):
    """The queue's entries in order, each with its item, query and decision at hand."""
    return (
        AdjudicationQueueEntry.objects.filter(study=study)
        .select_related("item__query", "item__adjudication__choice", "item__adjudication__decided_by")
        .order_by("rank")
    )


def queue_counts(study: Study, queue: AdjudicationQueue) -> dict:
    entries = AdjudicationQueueEntry.objects.filter(study=study)
    total = entries.count()
    decided = entries.filter(item__adjudication__isnull=False).count()
    return {
        "entries": total,
        "decided": decided,
        "undecided": total - decided,
        "disputed": queue.disputed,
        "sampled": queue.sampled,
        "sample_rate": queue.sample_rate,
        "seed": queue.seed,
        "built_at": queue.built_at.isoformat(),
    }


def next_undecided(study: Study, after: Item | None = None) -> int | None:
    """The first undecided item of the queue after `after` (from the top when it is not in the
    queue), wrapping round to the top; None when every entry is decided."""
    current_queue(study)
    undecided = AdjudicationQueueEntry.objects.filter(study=study, item__adjudication__isnull=True).order_by("rank")
    if after is not None:
        rank = AdjudicationQueueEntry.objects.filter(item=after).values_list("rank", flat=True).first()
        if rank is not None:
            following = undecided.filter(rank__gt=rank).values_list("item_id", flat=True).first()
            if following is not None:
                return following
        undecided = undecided.exclude(item=after)
    return undecided.values_list("item_id", flat=True).first()


@dataclass(frozen=True)
class QueuePlace:
    """Where an item stands in the queue: its 1-based place (None: not in the queue), how many
    entries there are, and its neighbours' item ids."""

    number: int | None
    entries: int
    previous: int | None
    next: int | None


def queue_place(study: Study, item: Item, agreement_now: float | None) -> QueuePlace:
    """The item's place, correcting its entry when its agreement changed since the build."""
    entries = AdjudicationQueueEntry.objects.filter(study=study)
    entry = entries.filter(item=item).first()
    total = entries.count()
    if entry is None:
        return QueuePlace(None, total, None, None)
    if agreement_now is not None and agreement_now != entry.agreement:
        # Changed since the queue last followed the study: shown where its agreement puts it now,
        # and marked, so the next view settles the rest (membership, the sample) as for any change.
        entry.rank = queue_rank(agreement_now, item.position)
        entries.filter(pk=entry.pk).update(agreement=agreement_now, rank=entry.rank)
        AdjudicationChange.objects.create(study=study, item=item)
    before = entries.filter(rank__lt=entry.rank).order_by("-rank").values_list("item_id", flat=True).first()
    after = entries.filter(rank__gt=entry.rank).order_by("rank").values_list("item_id", flat=True).first()
    return QueuePlace(entries.filter(rank__lt=entry.rank).count() + 1, total, before, after)


# --- decisions and rework ----------------------------------------------------------------------


def work_item(study: Study, item_id: int) -> Item:
    """The study's work item `item_id`; gold and qualification items and preference studies'
    items are not adjudicated, and the workspace does not tell them apart from missing ones."""
    item = Item.objects.select_related("study", "query").filter(study=study, pk=item_id, role=Item.Role.WORK).first()
    if item is None or study.kind == Study.Kind.PREFERENCE:
        raise Item.DoesNotExist(f"no work item {item_id} in study {study.pk}")
    return item


def counted_agreement(item: Item) -> tuple[float | None, list]:
    """The item's agreement now and its counted answers' keys (none in a preference study)."""
    if item.study.kind == Study.Kind.PREFERENCE:
        return None, []
    column = answer_column(item.study)
    answers = [
        as_key(value)
        for value in counted_judgments(item.study).filter(item=item).order_by().values_list(column, flat=True)
    ]
    return answers_agreement(Counter(answers), answer_scale(item.study)), answers


def decide(item: Item, *, by, reason: str | None = None, note: str = "", **answer) -> Adjudication:
    """The adjudicator's decision for a work item: the answer (as `quality.adjudicate` takes
    it), a reason from the study's list (required where the counted judgments disagree), an
    optional note. Deciding again replaces it."""
    study = item.study
    with transaction.atomic():
        lock_rows(Item.objects.filter(pk=item.pk))
        score, _ = counted_agreement(item)
        reason = require_reason(study, reason, required=score is not None and score < 1)
        return adjudicate(item, by=by, reason=reason, note=note, **answer)


def send_back(item: Item, *, by, reason: str, note: str = "") -> Rework:
    """Send a work item back for a fresh round (see the module docstring). Refused (field
    `item`) when it has no judgment left to send back, and in a preference study (field `study`),
    whose answers are never voided for disagreeing."""
    study = item.study
    if study.kind == Study.Kind.PREFERENCE:
        raise InputError(f"study {study.pk} is a preference study: items are not sent back", field="study")
    reason = require_reason(study, reason, required=True)
    with transaction.atomic():
        reworks = send_items_back(study, Item.objects.filter(pk=item.pk), by=by, reason=reason, note=note)
        if not reworks:
            raise InputError(f"item {item.pk} has no judgment to send back", field="item")
    return reworks[0]


def sent_back_reason(reason: str, note: str = "") -> str:
    """The void reason of a judgment sent back: label provenance and the item pages read a
    send-back from it, whichever path sent the item back."""
    return f"{SENT_BACK_PREFIX}: {reason}" + (f" ({note})" if note else "")


def send_items_back(study: Study, items: QuerySet[Item], *, by, reason: str, note: str = "") -> list[Rework]:
    """Send back those of `items` (the study's; a queryset of any size, read through subqueries)
    that have live judgments: each gets one Rework with the ids of the judgments it voided and
    the decision it withdrew, its Adjudication and queue entry are dropped, and every one of its
    live judgments is voided under sent_back_reason, freeing its slots. The one implementation
    behind the workspace's send_back (one item, a reason from the study's list) and the data
    manager's bulk send-back (annotation.services.rework), so label provenance, the queue and the
    item pages read both alike. Items without live judgments change nothing. The Reworks, in item
    id order. A fixed number of statements whatever the count, besides the Reworks' inserts, which
    bulk_create batches as the database allows (about 140 a statement on SQLite, 2,000 on Postgres).

    The items are locked first, all of them in id order (lock_rows; a submission locks its item,
    so none lands between reading the judgments and voiding them); the voids are UPDATEs that
    fire no post_save, and dropping the items' entries is all they change in a stored queue,
    which therefore keeps holding (as it did or did not before)."""
    note = (note or "").strip()
    with transaction.atomic():
        live = Judgment.objects.filter(item__study=study, item__in=items.values("pk"), voided=False)
        selected = Item.objects.filter(study=study, pk__in=items.values("pk"))
        # Every selected item, not only those with live judgments now: void_in_bulk locks them
        # all, and a transaction that locked a part first could wait on a racer holding the rest.
        lock_rows(selected)
        sent = Item.objects.filter(study=study, pk__in=live.values("item_id"))
        voided: dict[int, list[int]] = defaultdict(list)
        for item_id, judgment_id in live.order_by("item_id", "pk").values_list("item_id", "pk").iterator(10_000):
            voided[item_id].append(judgment_id)
        if not voided:
            return []
        withdrawn = {
            adjudication.item_id: adjudication_payload(adjudication)
            for adjudication in Adjudication.objects.filter(item__in=sent.values("pk"))
            .select_related("choice", "decided_by")
            .iterator(2000)
        }
        reworks = Rework.objects.bulk_create(
            [
                Rework(
                    item_id=item_id,
                    reason=reason,
                    note=note,
                    judgments=judgments,
                    withdrawn_decision=withdrawn.get(item_id),
                    sent_by=by,
                )
                for item_id, judgments in voided.items()
            ],
            batch_size=2000,
        )
        # Before the voids: `sent` reads the items through their live judgments.
        Adjudication.objects.filter(item__in=sent.values("pk")).delete()
        # The queue's entries are written under its row lock (follow_changes, build_queue): taken
        # after the items, the order every writer of both follows.
        lock_rows(AdjudicationQueue.objects.filter(study=study))
        AdjudicationQueueEntry.objects.filter(item__in=sent.values("pk")).delete()
        void_in_bulk(live, study=study, items=selected, by=by, reason=sent_back_reason(reason, note))
    return reworks


def rework_payload(rework: Rework) -> dict:
    return {
        "reason": rework.reason,
        "note": rework.note,
        "judgments": rework.judgments,
        "withdrawn_decision": rework.withdrawn_decision,
        "sent_by": rework.sent_by.get_username() if rework.sent_by else None,
        "sent_at": rework.sent_at.isoformat(),
    }
