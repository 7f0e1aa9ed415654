"""The adjudication queue follows a study being judged item by item: after any sequence of new
judgments, voids, undos, revisions, send-backs, decisions, sample-rate changes, exclusions and new
seeds, the queue kept by following the marked items is the queue a full build stores, entry for
entry (rank, agreement, judgments, sampled, reworked), with the same agreed items, and following
reads only the changed items. Staff opening the queue while annotators submit and staff void
never deadlock and miss nothing. Runs on the configured database (SQLite by default, Postgres
when DATABASE_URL points at one)."""

import random
import threading

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from annotation.models import (
    AdjudicationChange,
    AdjudicationQueue,
    AdjudicationQueueEntry,
    AgreedItem,
    Item,
    Judgment,
    Study,
)
from annotation.services import claim_next_item, submit_judgment
from annotation.services import rework as data_manager
from annotation.services.adjudication import (
    build_queue,
    current_queue,
    decide,
    queue_rank,
    sampled_items,
    send_back,
    set_sample_rate,
)
from annotation.services.annotator_actions import undo_last_submission, undoable_submission
from annotation.services.quality import block_annotator, unblock_annotator
from annotation.services.queue import void_judgment
from annotation.services.revisions import revise_judgment
from retrieval.errors import InputError
from tests.factories import (
    add_judgment,
    add_label_judgment,
    api_client,
    make_annotator,
    make_label_study,
    make_preference_study,
    make_relic_proxy_study,
    make_user,
)


def queue_state(study) -> dict:
    """Everything the stored queue holds, but when it was built."""
    queue = AdjudicationQueue.objects.get(study=study)
    entries = AdjudicationQueueEntry.objects.filter(study=study).order_by("rank")
    agreed = AgreedItem.objects.filter(study=study).values_list("item_id", "judgments", "sample_key")
    return {
        "entries": list(entries.values_list("item_id", "rank", "agreement", "judgments", "sampled", "reworked")),
        "agreed": sorted((item_id, judgments, bytes(key)) for item_id, judgments, key in agreed),
        "queue": (queue.disputed, queue.sampled, queue.sample_rate, queue.seed, queue.excluded, queue.stale),
    }


def built_afresh(study) -> dict:
    """What a full build of the queue stores now, read inside a savepoint that is then rolled
    back: the followed queue stays exactly as it was."""
    with transaction.atomic():
        build_queue(study)
        state = queue_state(study)
        transaction.set_rollback(True)
    return state


# --- a study being judged, one random change at a time ----------------------------------------------


class JudgedStudy:
    """A study of one answer kind, its annotators and a staffer, and every change the platform
    makes to what its adjudication queue orders, each picked at random (a seeded draw)."""

    def __init__(self, kind: str, rng: random.Random):
        self.rng = rng
        if kind == "proxy":
            study = make_relic_proxy_study(10, judgments_per_item=4)
        elif kind == "graded":
            study = make_label_study(items=10, judgments_per_item=4, label_schema={"scale": "graded-0-3"})
        else:
            study = make_label_study(
                kind=Study.Kind.QUOTABILITY,
                items=8,
                candidates=3,
                judgments_per_item=4,
                label_schema={"multi_select": True},
            )
        Study.objects.filter(pk=study.pk).update(allow_revisions=True, adjudication_sample_rate=0.3)
        study.refresh_from_db()
        self.study = study
        self.kind = kind
        self.staff = make_user(staff=True)
        self.people = [make_annotator() for _ in range(7)]
        self.items = list(self.study.items.order_by("position"))

    def answer(self) -> dict:
        """A random answer, drawn from few values so items often agree."""
        if self.kind == "proxy":
            return {"position": self.rng.choice([0, 0, 1])}
        if self.kind == "graded":
            return {"label": self.rng.choice([0, 2, 3, 3])}
        return {"selections": self.rng.choice([[0], [0], [0, 2], []])}

    def import_judgment(self) -> str:
        item = self.rng.choice(self.items)
        judged = set(Judgment.objects.filter(item=item).values_list("annotator_id", flat=True))
        free = [person for person in self.people if person.pk not in judged]
        if not free:
            return "nobody left to judge an item"
        person, answer = self.rng.choice(free), self.answer()
        if self.kind == "proxy":
            add_judgment(item, person, answer["position"])
        else:
            add_label_judgment(item, person, answer.get("label"), selections=answer.get("selections", ()))
        return f"{person} imported a judgment of item {item.position}"

    def submit(self) -> str:
        person = self.rng.choice(self.people)
        try:
            claim = claim_next_item(self.study, person)
        except Exception as refusal:  # blocked from the study meanwhile
            return f"{person} may not judge: {refusal}"
        if claim is None:
            return f"nothing left for {person}"
        submit_judgment(annotator=person, item=claim.item, seconds=3, **self.answer())
        return f"{person} submitted item {claim.item.position}"

    def void(self) -> str:
        live = list(Judgment.objects.filter(item__study=self.study, voided=False))
        if not live:
            return "no judgment to void"
        judgment = self.rng.choice(live)
        void_judgment(judgment, by=self.staff, reason="checked")
        return f"voided judgment {judgment.pk}"

    def bulk_void(self) -> str:
        chosen = self.rng.sample(self.items, 2)
        data_manager.void_judgments(self.study, self.pks(chosen), by=self.staff, reason="bulk check")
        return f"voided items {[item.position for item in chosen]} in bulk"

    def undo(self) -> str:
        person = self.rng.choice(self.people)
        if undoable_submission(self.study, person) is None:
            return f"{person} has nothing to undo"
        undo_last_submission(self.study, person)
        return f"{person} undid their last submission"

    def revise(self) -> str:
        web = list(Judgment.objects.filter(item__study=self.study, voided=False, source=Judgment.Source.WEB))
        if not web:
            return "no answer to revise"
        judgment = self.rng.choice(web)
        try:
            revise_judgment(judgment, judgment.annotator, **self.answer())
        except Exception as refusal:  # seen by others (decided), or the annotator is blocked
            return f"revision refused: {refusal}"
        return f"revised judgment {judgment.pk}"

    def send_back(self) -> str:
        item = self.rng.choice(self.items)
        if not Judgment.objects.filter(item=item, voided=False).exists():
            return "nothing to send back"
        send_back(item, by=self.staff, reason="Guideline gap")
        return f"sent item {item.position} back"

    def bulk_send_back(self) -> str:
        chosen = self.rng.sample(self.items, 2)
        data_manager.send_back(self.study, self.pks(chosen), by=self.staff, reason="bulk rework")
        return f"sent items {[item.position for item in chosen]} back in bulk"

    def decide(self) -> str:
        queued = list(AdjudicationQueueEntry.objects.filter(study=self.study).values_list("item_id", flat=True))
        if not queued:
            return "nothing to decide"
        item = Item.objects.select_related("study").get(pk=self.rng.choice(queued))
        decide(item, by=self.staff, reason="Annotator error", **self.answer())
        return f"decided item {item.position}"

    def sample_rate(self) -> str:
        rate = self.rng.choice([0, 0.1, 0.3, 0.5, 1])
        set_sample_rate(self.study, rate)
        return f"sample rate {rate}"

    def exclusion(self) -> str:
        person = self.rng.choice(self.people[:3])
        if not unblock_annotator(self.study, person):
            block_annotator(self.study, person, by=self.staff, reason="checked", exclude_judgments=True)
            return f"{person} blocked, judgments excluded"
        return f"{person} unblocked"

    def new_seed(self) -> str:
        Study.objects.filter(pk=self.study.pk).update(seed=self.rng.randrange(1000))
        self.study.refresh_from_db()
        return f"seed {self.study.seed}"

    def pks(self, items):
        return Item.objects.filter(pk__in=[item.pk for item in items])

    # Changes the queue follows (then: ones that build it afresh), weighted as a study sees them.
    FOLLOWED = {
        "import_judgment": 6,
        "submit": 6,
        "void": 2,
        "bulk_void": 1,
        "undo": 1,
        "revise": 1,
        "send_back": 1,
        "bulk_send_back": 1,
        "decide": 2,
        "sample_rate": 1,
    }
    BUILT = {"exclusion": 1, "new_seed": 1}

    def change(self) -> tuple[str, bool]:
        """One random change: what it was, and whether the queue must be built afresh after it."""
        weights = {**self.FOLLOWED, **self.BUILT}
        name = self.rng.choices(list(weights), weights=list(weights.values()))[0]
        return getattr(self, name)(), name in self.BUILT


@pytest.mark.django_db
@pytest.mark.parametrize("kind, seed", [("proxy", 1), ("proxy", 2), ("graded", 3), ("multi-select", 4)])
def test_after_every_change_the_followed_queue_equals_a_full_build(kind, seed):
    world = JudgedStudy(kind, random.Random(seed))
    for _ in range(12):
        world.import_judgment()
    current_queue(world.study)
    history, held = [], set()
    for _ in range(70):
        built_at = AdjudicationQueue.objects.get(study=world.study).built_at
        description, builds = world.change()
        history.append(description)
        current_queue(world.study)
        followed = queue_state(world.study)
        assert followed == built_afresh(world.study), history
        if not builds:  # followed item by item, never built afresh
            assert AdjudicationQueue.objects.get(study=world.study).built_at == built_at, history
        assert not AdjudicationChange.objects.filter(study=world.study).exists()
        study = world.study
        agreed = [item_id for item_id, _, _ in followed["agreed"]]
        drawn = {item_id for item_id, *_, sampled, _ in followed["entries"] if sampled}
        assert drawn == sampled_items(agreed, study.adjudication_sample_rate, study.seed), history
        for _, _, score, _, sampled, reworked in followed["entries"]:
            held |= {"disputed"} if score < 1 else set()
            held |= {"sampled"} if sampled else set()
            held |= {"reworked"} if reworked else set()
    assert held == {"disputed", "sampled", "reworked"}  # the draw went through every kind of entry


# --- the stored order -----------------------------------------------------------------------------------------


def test_a_rank_orders_by_agreement_then_position_whatever_else_is_queued():
    assert queue_rank(0.0, 5) < queue_rank(0.0, 6) < queue_rank(1 / 3, 0) < queue_rank(0.5, 0) < queue_rank(1.0, 0)
    assert queue_rank(1.0, 2**31 - 1) == 2**63 - 1  # the largest: a database's big integer holds it
    assert queue_rank(1 / 3, 4) == queue_rank(0.1 + 0.2 + 1 / 3 - 0.3, 4)  # float rounding alone ties


@pytest.mark.django_db
def test_the_queue_api_gives_each_entry_its_place_not_its_sort_key():
    study = make_relic_proxy_study(3)
    people = [make_annotator() for _ in range(2)]
    for item, positions in zip(study.items.order_by("position"), [(0, 1), (0, 0), (1, 0)]):
        for person, position in zip(people, positions):
            add_judgment(item, person, position)
    results = api_client(make_user(staff=True)).get(f"/api/studies/{study.pk}/adjudication/queue/").json()["results"]
    assert [row["rank"] for row in results] == [0, 1]
    stored = AdjudicationQueueEntry.objects.filter(study=study).order_by("rank").values_list("item_id", "rank")
    assert [row["item"] for row in results] == [item_id for item_id, _ in stored]
    assert [rank for _, rank in stored] == [queue_rank(0.0, 0), queue_rank(0.0, 2)]


@pytest.mark.django_db
def test_following_one_new_judgment_costs_the_same_statements_at_any_study_size():
    statements = []
    for size in (4, 24):
        study = make_relic_proxy_study(size, judgments_per_item=4)
        people = [make_annotator() for _ in range(4)]
        items = list(study.items.order_by("position"))
        for n, item in enumerate(items):
            for person, position in zip(people[:3], (0, n % 2, 1)):
                add_judgment(item, person, position)
        current_queue(study)
        add_judgment(items[-1], people[3], 0)
        with CaptureQueriesContext(connection) as captured:
            current_queue(study)
        statements.append(len(captured.captured_queries))
        assert queue_state(study) == built_afresh(study)
    assert statements[0] == statements[1] <= 24


@pytest.mark.django_db
def test_every_writer_of_judgments_marks_its_items_in_its_own_transaction():
    study = make_relic_proxy_study(3)
    first, second, third = study.items.order_by("position")
    person, staff = make_annotator(), make_user(staff=True)
    judgment = add_judgment(first, person, 0)
    add_judgment(second, person, 1)
    void_judgment(judgment, by=staff, reason="checked")
    data_manager.void_judgments(study, study.items.filter(pk__in=[second.pk, third.pk]), by=staff, reason="bulk")
    marked = list(AdjudicationChange.objects.filter(study=study).order_by("pk").values_list("item_id", flat=True))
    # Two imports, a void, then a bulk void over two items, which marks the one that held judgments.
    assert marked == [first.pk, second.pk, first.pk, second.pk]
    current_queue(study)
    assert not AdjudicationChange.objects.exists()


@pytest.mark.django_db
def test_a_preference_study_marks_nothing():
    study = make_preference_study()
    item = study.items.first()
    assignment = claim_next_item(study, make_annotator())
    assert assignment is not None and item is not None
    submit_judgment(annotator=assignment.annotator, item=assignment.item, position=0)
    assert not AdjudicationChange.objects.exists()


@pytest.mark.django_db
def test_a_new_sample_rate_redraws_from_the_stored_agreed_items_without_a_build():
    study = make_relic_proxy_study(12)
    people = [make_annotator() for _ in range(2)]
    for item in study.items.all():
        for person in people:
            add_judgment(item, person, 1)
    built = current_queue(study)
    assert AgreedItem.objects.filter(study=study).count() == 12 and built.sampled == 0
    with CaptureQueriesContext(connection) as captured:
        queue = set_sample_rate(study, 0.25)
    assert queue.sampled == 3 and queue.built_at == built.built_at
    read = [query["sql"] for query in captured.captured_queries if "annotation_judgment" in query["sql"]]
    assert len(read) == 1 and "MAX(" in read[0]  # the newest judgment's id, no judgment read
    assert queue_state(study) == built_afresh(study)


# --- races ----------------------------------------------------------------------------------------------------


def in_thread(errors: list, action) -> threading.Thread:
    def run():
        try:
            action()
        except Exception as exc:  # a deadlock shows here: Postgres aborts one of the racers
            errors.append(exc)
        finally:
            connection.close()

    return threading.Thread(target=run)


@pytest.mark.django_db(transaction=True)
def test_staff_following_the_queue_while_annotators_submit_and_staff_void_never_deadlock_nor_miss_a_change():
    study = make_relic_proxy_study(8, judgments_per_item=3)
    staff = [make_user(staff=True) for _ in range(3)]
    annotators = [make_annotator() for _ in range(6)]
    for item in list(study.items.order_by("position"))[:4]:  # a queue to follow from the start
        for person, position in zip(annotators[:2], (0, 1)):
            add_judgment(item, person, position)
    current_queue(study)
    errors, start, done = [], threading.Barrier(6), threading.Event()

    def annotate(person, n):
        start.wait()
        for turn in range(8):
            claim = claim_next_item(study, person)
            if claim is None:
                return
            submit_judgment(annotator=person, item=claim.item, position=(n + turn) % 2, seconds=2)

    def view_queue():
        start.wait()
        while not done.is_set():
            current_queue(study)

    def void_and_send_back():
        start.wait()
        for turn in range(6):
            live = Judgment.objects.filter(item__study=study, voided=False).order_by("-pk")
            judgment = live.first()
            if judgment is None:
                continue
            if turn % 3 == 2:
                item = Item.objects.select_related("study").get(pk=judgment.item_id)
                try:
                    send_back(item, by=staff[2], reason="Guideline gap")
                except InputError:  # voided meanwhile by a racing send-back: nothing left to send
                    continue
            else:
                void_judgment(judgment, by=staff[2], reason="checked")

    writers = [in_thread(errors, lambda p=p, n=n: annotate(p, n)) for n, p in enumerate(annotators[2:5])]
    writers.append(in_thread(errors, void_and_send_back))
    viewers = [in_thread(errors, view_queue) for _ in staff[:2]]
    for thread in [*writers, *viewers]:
        thread.start()
    for thread in writers:
        thread.join()
    done.set()
    for thread in viewers:
        thread.join()

    assert errors == []
    current_queue(study)
    assert queue_state(study) == built_afresh(study)
    assert not AdjudicationChange.objects.exists()
