"""Seed a fresh installation with something to look at: demo accounts, the demo book with its
scholarly contexts, a BM25 run over it, and a proxy study drawn from that run.

Every step finds what an earlier call made before making anything, so `seed_demo` can run on
every start of the platform. It runs BM25 in-process (not through Celery): the worker is not up
yet when scripts/run.sh seeds, and the demo book ranks in well under a second.
"""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model

from annotation.models import AnnotatorProfile, Study
from annotation.services import create_proxy_study
from jobs.progress import Progress, no_progress
from retrieval.models import Collection, Retriever, Run
from retrieval.services.importers import import_relic
from retrieval.services.runs import create_run, execute_run, get_or_create_retriever

from .accounts import DemoAccount, demo_accounts

DEMO_RELIC = Path(__file__).resolve().parent / "salt_ledger_relic.json"
DEMO_COLLECTION = "demo-salt-ledger"
DEMO_STUDY = "Demo: The Salt Ledger, which sentence was quoted?"
DEMO_STUDY_ITEMS = 20
DEMO_STUDY_SEED = 7
DEMO_GUIDELINES = (
    "Each item is a passage of literary criticism about the tale 'The Salt Ledger' in which one "
    "quotation has been masked. Read the context on both sides of the mask, then choose the "
    "candidate sentence that the critic quoted. Exactly one candidate is right; the others are "
    "sentences of the same tale that a search engine found similar."
)


def ensure_account(account: DemoAccount):
    """The account with the demo flags and password, changing only what differs (setting an
    unchanged password again would sign its open sessions out)."""
    user, _ = get_user_model().objects.get_or_create(username=account.username)
    user.is_staff = user.is_superuser = account.is_staff
    user.is_active = True
    if not user.check_password(account.password):
        user.set_password(account.password)
    user.save()
    if not account.is_staff:
        AnnotatorProfile.objects.get_or_create(user=user, defaults={"expertise": "demo annotator"})
    return user


def ensure_collection(progress: Progress) -> Collection:
    existing = Collection.objects.filter(name=DEMO_COLLECTION).first()
    if existing:
        return existing
    import_relic(DEMO_RELIC, collection_name=DEMO_COLLECTION, progress=progress)
    return Collection.objects.get(name=DEMO_COLLECTION)


def ensure_bm25_run(collection: Collection, progress: Progress) -> Run:
    finished = (
        Run.objects.filter(collection=collection, retriever__kind=Retriever.Kind.BM25, status=Run.Status.DONE)
        .order_by("created_at")
        .first()
    )
    if finished:
        return finished
    return execute_run(create_run(collection, get_or_create_retriever(Retriever.Kind.BM25)), progress)


def ensure_study(collection: Collection, run: Run, annotators: list, admin, progress: Progress) -> Study:
    existing = Study.objects.filter(name=DEMO_STUDY).first()
    if existing:
        return existing
    creation = create_proxy_study(
        name=DEMO_STUDY,
        collection=collection,
        negatives_run=run,
        items=DEMO_STUDY_ITEMS,
        candidates=3,
        # Two demo annotators, so two judgments per item lets them finish the study between them.
        judgments_per_item=len(annotators),
        seed=DEMO_STUDY_SEED,
        single_sentence=True,
        guidelines=DEMO_GUIDELINES,
        annotators=annotators,
        created_by=admin,
        progress=progress,
    )
    return creation.study


def seed_demo(progress: Progress = no_progress) -> dict:
    accounts = demo_accounts()
    users = {account.username: ensure_account(account) for account in accounts}
    admin = next(users[a.username] for a in accounts if a.is_staff)
    annotators = [users[a.username] for a in accounts if not a.is_staff]
    collection = ensure_collection(progress)
    run = ensure_bm25_run(collection, progress)
    study = ensure_study(collection, run, annotators, admin, progress)
    return {
        "accounts": [{"username": a.username, "password": a.password, "role": a.role} for a in accounts],
        "collection": collection.name,
        "queries": collection.queries.count(),
        "run_id": run.pk,
        "study_id": study.pk,
        "items": study.items.count(),
    }
