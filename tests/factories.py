"""Small builders shared by the test suites: each makes the least data a test needs and
returns the objects, so tests read as the situation they set up."""

from __future__ import annotations

import io
import itertools
import json

import numpy as np
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from rest_framework.test import APIClient

from annotation.models import AnnotatorProfile, Item, ItemCandidate, Judgment, Study
from annotation.services.live_counts import refresh_live_counts
from integrations.models import Webhook
from outbound.sealing import hint, seal
from retrieval.models import Collection, Document, Hit, Passage, PoolEntry, Qrel, Query, Retriever, Run, Sentence
from retrieval.planner import refresh_statistics

_sequence = itertools.count(1)


def make_user(username: str | None = None, *, staff: bool = False, password: str = "pw-for-tests"):
    """An active user; `staff=True` gives the staff flag (not superuser)."""
    username = username or f"user{next(_sequence)}"
    return get_user_model().objects.create_user(username=username, password=password, is_staff=staff)


def grant(user, *permissions: str):
    """Give `user` these permissions ("app_label.codename") and return it."""
    for permission in permissions:
        app_label, codename = permission.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return user


def api_client(user=None) -> APIClient:
    """A REST client, authenticated as `user` when one is given (anonymous otherwise)."""
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def make_collection(name: str | None = None, kind: str = Collection.Kind.BEIR) -> Collection:
    return Collection.objects.create(name=name or f"collection-{next(_sequence)}", kind=kind)


def make_passages(collection: Collection, count: int) -> list[Passage]:
    start = collection.passages.count()
    return [
        Passage.objects.create(
            collection=collection,
            external_id=f"p{start + index}",
            text=f"passage {start + index}",
            ordinal=start + index,
        )
        for index in range(count)
    ]


def make_query(collection: Collection, external_id: str | None = None) -> Query:
    external_id = external_id or f"q{next(_sequence)}"
    return Query.objects.create(collection=collection, external_id=external_id, text=f"query {external_id}")


def make_run(collection: Collection, kind: str = Retriever.Kind.BM25, name: str | None = None) -> Run:
    retriever = Retriever.objects.create(name=name or f"{kind}-{next(_sequence)}", kind=kind)
    return Run.objects.create(retriever=retriever, collection=collection, status=Run.Status.DONE)


def add_hits(run: Run, query: Query, scored_passages: list[tuple[Passage, float]]) -> list[Hit]:
    """Store hits in the given order as ranks 1, 2, ... with the given scores."""
    return [
        Hit.objects.create(run=run, query=query, passage=passage, rank=rank, score=score)
        for rank, (passage, score) in enumerate(scored_passages, start=1)
    ]


def make_proxy_study(
    collection: Collection | None = None,
    *,
    gold_positions: list[int],
    candidates: int = 3,
    judgments_per_item: int = 3,
    negatives_run: Run | None = None,
    name: str | None = None,
) -> Study:
    """A proxy study with one item per entry of `gold_positions`; each item gets a fresh query
    and `candidates` fresh passages, the gold shown at the given 0-based position. Negatives
    are marked as coming from `negatives_run` (ranks 1, 2, ...) when one is given."""
    collection = collection or make_collection()
    study = Study.objects.create(
        name=name or f"study-{next(_sequence)}",
        kind=Study.Kind.PROXY,
        collection=collection,
        negatives_run=negatives_run,
        candidates_per_item=candidates,
        judgments_per_item=judgments_per_item,
    )
    for item_position, gold_position in enumerate(gold_positions):
        item = Item.objects.create(study=study, query=make_query(collection), position=item_position)
        negative_ranks = itertools.count(1)
        for position, passage in enumerate(make_passages(collection, candidates)):
            is_gold = position == gold_position
            ItemCandidate.objects.create(
                item=item,
                passage=passage,
                position=position,
                is_gold=is_gold,
                source_run=None if is_gold else negatives_run,
                source_rank=None if is_gold or negatives_run is None else next(negative_ranks),
            )
    return study


def set_item_role(item: Item, role: str, **fields) -> None:
    """Give a judged item another role, with its judgments' copy of it (Judgment.item_role), as
    if it had been designated before anyone judged it (the platform refuses to change a judged
    item's role: annotation.services.quality.designate_items)."""
    Item.objects.filter(pk=item.pk).update(role=role, **fields)
    Judgment.objects.filter(item=item).update(item_role=role)


def add_judgment(item: Item, annotator, position: int) -> Judgment:
    """A submitted (imported) choice of the candidate shown at `position`."""
    choice = item.candidates.get(position=position)
    judgment = Judgment.objects.create(item=item, annotator=annotator, choice=choice, source=Judgment.Source.IMPORT)
    refresh_live_counts(item.study, Item.objects.filter(pk=item.pk))  # as every writer of judgments does
    return judgment


# --- importer inputs and checks (tests/retrieval/test_import_*.py) ------------------------------


def retrieval_row_counts() -> dict[str, int]:
    """How many rows every retrieval table holds: compare before and after to prove that a
    failed import wrote nothing."""
    tables = (Collection, Document, Sentence, Passage, Query, Qrel, PoolEntry)
    return {model.__name__: model.objects.count() for model in tables}


def response_text(response) -> str:
    """A response's body as text, whether streamed (exports) or not."""
    if response.streaming:
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def call_json_command(name: str, *args) -> dict:
    """Run a management command with --json and return the JSON object on its last stdout line."""
    out = io.StringIO()
    call_command(name, *map(str, args), "--json", stdout=out)
    return json.loads(out.getvalue().strip().splitlines()[-1])


def create_pooled_study(
    collection: Collection,
    run_ids,
    *,
    depth: int,
    name: str = "pool",
    judgments_per_item: int = 2,
    scale: str = "binary",
    seed: int = 0,
) -> int:
    """A relevance study pooled from the runs' top `depth`, made as a researcher makes one (the
    create_study command): its id."""
    options = ["--kind", "relevance", "--collection", collection.name, "--name", name]
    options += ["--runs", ",".join(str(run_id) for run_id in run_ids), "--depth", str(depth)]
    options += ["--judgments-per-item", str(judgments_per_item), "--scale", scale, "--seed", str(seed)]
    return call_json_command("create_study", *options)["study_id"]


def export_study(study: Study) -> list[dict]:
    """The rows the export_study command prints for the study."""
    out = io.StringIO()
    call_command("export_study", str(study.pk), stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


def write_jsonl(path, rows):
    """A JSON-lines file of `rows`; a row that is already a string is written as it is (to test
    broken lines)."""
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def relic_book(sentences: list[str], quotes: dict[str, list], candidates: dict[str, list[int]] | None = None) -> dict:
    """One book of a RELiC JSON file; candidates default to every window of lengths 1..5."""
    if candidates is None:
        candidates = {f"{n}_sentence": list(range(len(sentences) - n + 1)) for n in range(1, 6)}
    return {"quotes": quotes, "sentences": list(sentences), "candidates": candidates}


def write_relic_file(path, books: dict[str, dict]):
    """Write a RELiC JSON file (book id -> relic_book(...)), indented so errors have lines."""
    path.write_text(json.dumps(books, indent=1), encoding="utf-8")
    return path


def write_beir_folder(
    directory,
    corpus: list[dict],
    queries: list[dict],
    qrels: list[tuple[str, str, int]],
    pools: dict[str, list[str]] | None = None,
    qrels_name: str = "qrels.tsv",
):
    """Write a BEIR-style folder: corpus.jsonl, queries.jsonl, a qrels file (with its header) at
    `qrels_name`, and pools.jsonl when `pools` is given."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, records in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        (directory / name).write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    qrels_path = directory / qrels_name
    qrels_path.parent.mkdir(parents=True, exist_ok=True)
    rows = ["query-id\tcorpus-id\tscore", *(f"{q}\t{c}\t{s}" for q, c, s in qrels)]
    qrels_path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    if pools is not None:
        lines = (json.dumps({"query-id": q, "corpus-ids": ids}) + "\n" for q, ids in pools.items())
        (directory / "pools.jsonl").write_text("".join(lines), encoding="utf-8")
    return directory


# --- proxy studies built through the real service (tests/annotation/) ---------------------------


def make_annotator(username: str | None = None, *, blocked: bool = False, password: str = "pw-for-tests"):
    """An active, non-staff user with an annotator profile (blocked when asked)."""
    user = make_user(username, password=password)
    AnnotatorProfile.objects.create(user=user, blocked=blocked, blocked_reason="blocked in a test" if blocked else "")
    return user


def book_sentence(index: int) -> str:
    """The text of sentence `index` of make_relic_collection's book: distinct and long enough to
    count as a sentence of its own, with the index twice so that no run of ten words recurs
    between sentences (windows of them would otherwise be near-duplicates: candidate_hygiene)."""
    return f"Sentence number {index} of the novel says what sentence {index} says."


def make_relic_collection(
    n_queries: int, *, book_sentences: int | None = None, quote_length: int = 1, name: str | None = None
) -> Collection:
    """A RELiC-style collection: one book whose passages are all windows of 1..quote_length
    sentences (external ids "book:start:length"), and `n_queries` quotes of `quote_length`
    sentences, each with 4 sentences of critic's context on either side and its gold window as
    the one relevant qrel. Quote i starts at sentence 10 + 10 * i."""
    book_sentences = book_sentences or 10 * n_queries + 20
    collection = make_collection(name, kind=Collection.Kind.RELIC)
    book = Document.objects.create(collection=collection, external_id="book", title="A Novel")
    Sentence.objects.bulk_create(
        [Sentence(document=book, index=index, text=book_sentence(index)) for index in range(book_sentences)]
    )
    Passage.objects.bulk_create(
        [
            Passage(
                collection=collection,
                document=book,
                external_id=f"book:{start}:{length}",
                start=start,
                length=length,
                text=" ".join(book_sentence(i) for i in range(start, start + length)),
                ordinal=ordinal,
            )
            for ordinal, (length, start) in enumerate(
                (length, start) for length in range(1, quote_length + 1) for start in range(book_sentences - length + 1)
            )
        ]
    )
    for number in range(n_queries):
        start = 10 + 10 * number
        query = Query.objects.create(
            collection=collection,
            external_id=f"quote{number}",
            document=book,
            quote_length=quote_length,
            left_context=[f"Critic {number} writes remark {j} before the quotation." for j in range(4)],
            right_context=[f"Critic {number} adds remark {j} after the quotation." for j in range(4)],
            ordinal=number,
        )
        Qrel.objects.create(
            query=query, passage=collection.passages.get(external_id=f"book:{start}:{quote_length}"), relevance=1
        )
    return collection


def make_scored_run(collection: Collection, scores: dict, kind: str = Retriever.Kind.BM25) -> Run:
    """A finished run whose hits rank, per query, the given {passage: score} by score descending
    (ties: passage order). Queries and passages may be objects or external ids."""
    run = make_run(collection, kind)
    for query, passage_scores in scores.items():
        if isinstance(query, str):
            query = collection.queries.get(external_id=query)
        scored = [
            (collection.passages.get(external_id=p) if isinstance(p, str) else p, float(s))
            for p, s in passage_scores.items()
        ]
        scored.sort(key=lambda pair: (-pair[1], pair[0].ordinal))
        Hit.objects.bulk_create(
            [Hit(run=run, query=query, passage=p, rank=rank, score=s) for rank, (p, s) in enumerate(scored, start=1)]
        )
    return run


def make_neighbour_run(collection: Collection, depth: int = 30) -> Run:
    """A run that ranks, for every query with a gold (its one relevant passage), the `depth`
    windows of the quote's length nearest to the gold (nearest first, the gold itself included),
    like a retriever fooled by neighbouring text. Windows that touch the gold come first, so
    study creation must skip them when quotes are longer than one sentence."""
    scores = {}
    for qrel in Qrel.objects.filter(query__collection=collection, relevance__gt=0).select_related("query", "passage"):
        query, gold = qrel.query, qrel.passage
        windows = collection.passages.filter(
            document=gold.document,
            length=gold.length,
            start__gte=max(0, gold.start - depth // 2),
            start__lte=gold.start + depth // 2,
        )
        scores[query] = {window: -abs(window.start - gold.start) for window in windows}
    return make_scored_run(collection, scores)


def make_relic_proxy_study(
    n_items: int = 6, *, collection: Collection | None = None, run: Run | None = None, **settings
):
    """A proxy study made by create_proxy_study over make_relic_collection and make_neighbour_run;
    `settings` override create_proxy_study's arguments."""
    from annotation.services import create_proxy_study

    collection = collection or make_relic_collection(n_items)
    run = run or make_neighbour_run(collection)
    options = {"name": f"study-{next(_sequence)}", "items": n_items, "seed": 7, **settings}
    return create_proxy_study(collection=collection, negatives_run=run, **options).study


# --- runs and metrics (tests/retrieval/test_candidates.py, test_runs.py, test_metrics.py) --------


def make_text_passages(collection: Collection, texts: list[str]) -> list[Passage]:
    """BEIR-style passages (no document, no position) with the given texts, in import order."""
    start = collection.passages.count()
    return [
        Passage.objects.create(collection=collection, external_id=f"d{start + index}", text=text, ordinal=start + index)
        for index, text in enumerate(texts)
    ]


def make_book(collection: Collection, sentences: list[str], lengths=(1,), external_id: str | None = None) -> Document:
    """A document whose passages are every window of each of `lengths` sentences, imported
    length-major ("<book>:<start>:<length>" external ids, like import_book)."""
    external_id = external_id or f"book{next(_sequence)}"
    document = Document.objects.create(
        collection=collection, external_id=external_id, title=external_id, ordinal=collection.documents.count()
    )
    ordinal = collection.passages.count()
    for length in lengths:
        for start in range(len(sentences) - length + 1):
            Passage.objects.create(
                collection=collection,
                document=document,
                external_id=f"{external_id}:{start}:{length}",
                text=" ".join(sentences[start : start + length]),
                start=start,
                length=length,
                ordinal=ordinal,
            )
            ordinal += 1
    return document


def make_text_query(collection: Collection, text: str, external_id: str | None = None, **fields) -> Query:
    external_id = external_id or f"q{next(_sequence)}"
    ordinal = collection.queries.count()
    return Query.objects.create(collection=collection, external_id=external_id, text=text, ordinal=ordinal, **fields)


def add_qrels(query: Query, relevances: dict[Passage, int]) -> None:
    Qrel.objects.bulk_create([Qrel(query=query, passage=p, relevance=r) for p, r in relevances.items()])


def add_pool(query: Query, passages: list[Passage]) -> None:
    """The query's own candidate pool, in the given order."""
    PoolEntry.objects.bulk_create(
        [PoolEntry(query=query, passage=passage, position=position) for position, passage in enumerate(passages)]
    )


# --- dense retriever training (tests/retrieval/test_training.py, test_worker_crash.py) -----------

# Topics a code word stands for; each book has one sentence per topic, in this order.
CODE_WORD_TOPICS = {
    "zorblat": (
        "The telescope revealed faint galaxies and the rings of Saturn.",
        "Astronomers charted a comet crossing the night sky.",
    ),
    "quiffen": (
        "She kneaded the dough and baked fresh bread in the oven.",
        "The chef simmered onions and garlic for the stew.",
    ),
    "dravlik": (
        "The crew hoisted the sails and steered through rough waves.",
        "A sailor tied the rope to the mast before the storm.",
    ),
    "morquet": (
        "He planted tomatoes and watered the roses every morning.",
        "The gardener pruned the hedges and weeded the flower beds.",
    ),
    "teglish": (
        "The orchestra tuned its violins before the symphony began.",
        "She practised piano scales and sang in the choir.",
    ),
    "wumbrix": (
        "The grandmaster moved a knight and threatened checkmate.",
        "Both players castled early and traded bishops.",
    ),
}
CODE_WORD_TEMPLATES = {
    "train": (
        "Here the {code} theme returns.",
        "Readers recall the {code} scene.",
        "This is the {code} moment.",
        "Again we meet {code}.",
    ),
    "validation": ("Consider the {code} episode.",),
    "test": ("Once more {code} appears.",),
}


def make_code_word_collection(name: str | None = None) -> Collection:
    """A learnable task a pretrained model cannot solve: two books with one sentence per topic,
    and RELiC-style queries whose only clue is an invented code word for the topic (the gold is
    that topic's sentence in the query's book). Splits use disjoint query templates."""
    collection = make_collection(name, kind=Collection.Kind.RELIC)
    for book_index in range(2):
        sentences = [pair[book_index] for pair in CODE_WORD_TOPICS.values()]
        book = make_book(collection, sentences, external_id=f"book{book_index}")
        for topic_index, code in enumerate(CODE_WORD_TOPICS):
            gold = collection.passages.get(document=book, start=topic_index)
            for split, templates in CODE_WORD_TEMPLATES.items():
                for template_index, template in enumerate(templates):
                    query = Query.objects.create(
                        collection=collection,
                        external_id=f"{book.external_id}-{code}-{split}{template_index}",
                        document=book,
                        quote_length=1,
                        split=split,
                        ordinal=collection.queries.count(),
                        left_context=[template.format(code=code)],
                        right_context=["The critic moves on."],
                    )
                    Qrel.objects.create(query=query, passage=gold, relevance=1)
    return collection


# --- a Celery client on a test broker (tests/test_celery_worker.py, tests/test_settings_and_deploy.py)


def celery_client(broker_url: str):
    """A Celery client on `broker_url` (also its result backend) with the platform's own queues
    and routes, for sending tasks to a worker started by a test."""
    from celery import Celery

    from marginalia.celery import app

    client = Celery("marginalia-test-client", broker=broker_url, backend=broker_url)
    client.conf.task_queues = app.conf.task_queues
    client.conf.task_routes = app.conf.task_routes
    return client


# --- label studies as the web pages show them (tests/annotation/test_views*.py, tests/browser/) ---

# Passages with what a page could get wrong: a line break, characters HTML escapes, a quotation.
PLOT_PASSAGES = (
    "The detective finds the letter hidden in the piano.\nLater that night he burns it & watches the ashes.",
    "A storm keeps the guests at the inn; nobody may leave until the <bridge> is repaired.",
    "The gardener confesses that he saw the maid near the greenhouse at midnight.",
    "Years later, the letter's author returns to the village under another name.",
)
PLOT_QUERIES = (
    "A detective destroys a letter he found inside a musical instrument.",
    "Travellers are trapped at an inn by bad weather.",
)


def make_plot_relevance_study(*, label_schema: dict | None = None, depth: int = 2, **settings) -> Study:
    """A relevance study made by create_relevance_study: two plot descriptions, each paired with
    the top `depth` of a run over PLOT_PASSAGES (query i ranks passage i first)."""
    from annotation.services import create_relevance_study

    collection = make_collection()
    passages = make_text_passages(collection, list(PLOT_PASSAGES))
    queries = [make_text_query(collection, text) for text in PLOT_QUERIES]
    run = make_scored_run(
        collection,
        {
            query: {passage: -abs(index - number) for index, passage in enumerate(passages)}
            for number, query in enumerate(queries)
        },
    )
    options = {"name": f"relevance-{next(_sequence)}", "seed": 3, **settings}
    return create_relevance_study(
        collection=collection, runs=[run], depth=depth, label_schema=label_schema, **options
    ).study


ARTICLE_CONTEXT = (
    "The minister spoke for an hour about the harbour project.",
    "Critics say the costs have doubled since the plan was announced.",
)
SPEECH_PARAGRAPHS = (
    "We will build the harbour because our children deserve a port that works.",
    "The budget has been reviewed twice by independent auditors.",
    "I thank the mayor and the council for their patience.",
)


def make_speech_quotability_study(*, multi_select: bool = False, label_schema: dict | None = None, **settings) -> Study:
    """A quotability study over one article context (title in the query's metadata, left context
    only) and a speech of SPEECH_PARAGRAPHS as its pool: the run's top paragraph per item, or
    with `multi_select` the pilot showing every paragraph of the pool."""
    from annotation.services import create_quotability_study

    collection = make_collection()
    paragraphs = make_text_passages(collection, list(SPEECH_PARAGRAPHS))
    query = Query.objects.create(
        collection=collection,
        external_id=f"article{next(_sequence)}",
        left_context=list(ARTICLE_CONTEXT),
        metadata={"title": "Harbour plan divides the council"},
    )
    add_pool(query, paragraphs)
    schema = {**(label_schema or {}), **({"multi_select": True} if multi_select else {})}
    options = {"name": f"quotability-{next(_sequence)}", "seed": 5, "judgments_per_item": 5, **settings}
    if multi_select:
        return create_quotability_study(
            collection=collection, candidates_from="pool", label_schema=schema, **options
        ).study
    run = make_scored_run(collection, {query: {paragraph: -index for index, paragraph in enumerate(paragraphs)}})
    return create_quotability_study(
        collection=collection, run=run, selection="top_k", depth=2, label_schema=schema or None, **options
    ).study


# --- label studies built row by row, for statistics (tests/evaluation/test_label_report*.py) -----


def make_label_study(
    collection: Collection | None = None,
    *,
    kind: str = Study.Kind.RELEVANCE,
    items: int = 0,
    candidates: int = 1,
    judgments_per_item: int = 3,
    label_schema: dict | None = None,
    name: str | None = None,
    **fields,
) -> Study:
    """A relevance or quotability study with `items` work items, each a fresh query with
    `candidates` fresh passages (1: a label item; more: the multi-select pilot). The schema is
    normalised as create_relevance_study would; `fields` set other Study fields."""
    from annotation.services.labels import validate_schema

    collection = collection or make_collection()
    study = Study.objects.create(
        name=name or f"label-study-{next(_sequence)}",
        kind=kind,
        collection=collection,
        candidates_per_item=candidates,
        judgments_per_item=judgments_per_item,
        label_schema=validate_schema(label_schema, kind=kind),
        **fields,
    )
    for _ in range(items):
        add_label_item(study, candidates=candidates)
    return study


def add_label_item(
    study: Study,
    *,
    role: str = Item.Role.WORK,
    expected_label=None,
    candidates: int = 1,
    query: Query | None = None,
    passages: list[Passage] | None = None,
) -> Item:
    """The study's next item (any role) showing `passages` (default: `candidates` fresh ones)
    for `query` (default: a fresh one), in the given order."""
    query = query or make_query(study.collection)
    passages = passages or make_passages(study.collection, candidates)
    item = Item.objects.create(
        study=study, query=query, position=study.items.count(), role=role, expected_label=expected_label
    )
    ItemCandidate.objects.bulk_create(
        [ItemCandidate(item=item, passage=passage, position=position) for position, passage in enumerate(passages)]
    )
    return item


def add_label_judgment(
    item: Item,
    annotator,
    label: int | None = None,
    *,
    spans: list[dict] = (),
    rubric: dict | None = None,
    selections: list[int] = (),
    rationale: str = "",
    seconds: float | None = None,
) -> Judgment:
    """A submitted (imported) judgment of a label study, stored as given: spans as
    {"target", "start", "end"} dicts, selections as display positions."""
    judgment = Judgment.objects.create(
        item=item,
        annotator=annotator,
        label=label,
        spans=[dict(span) for span in spans],
        rubric=rubric or {},
        selections=sorted(selections),
        rationale=rationale,
        seconds=seconds,
        source=Judgment.Source.IMPORT,
    )
    refresh_live_counts(item.study, Item.objects.filter(pk=item.pk))
    return judgment


# --- relevance and quotability studies built through the real services (test_relevance_*, test_quotability_*) --


def make_label_collection(n_queries: int = 2, n_passages: int = 6) -> Collection:
    """BEIR-style: passages d0.. ("Passage number i ...") and queries q0.. with text; query i's
    one relevant passage is d{i}."""
    collection = make_collection()
    passages = make_text_passages(collection, [f"Passage number {i} tells its own story." for i in range(n_passages)])
    for number in range(n_queries):
        query = make_text_query(collection, f"Query number {number} asks about a story.", external_id=f"q{number}")
        add_qrels(query, {passages[number]: 1})
    return collection


def make_quote_collection(n_contexts: int = 3, paragraphs_per_source: int = 4) -> Collection:
    """Quote recommendation: source documents s0.. of `paragraphs_per_source` paragraphs each
    (passages "s<d>:p<i>", no sentence positions) and contexts c0.. (article title in metadata,
    four left-context sentences); context i's gold is paragraph 0 of source i."""
    collection = make_collection()
    for number in range(n_contexts):
        source = Document.objects.create(
            collection=collection, external_id=f"s{number}", title=f"Source {number}", ordinal=number
        )
        ordinal = collection.passages.count()
        Passage.objects.bulk_create(
            [
                Passage(
                    collection=collection,
                    document=source,
                    external_id=f"s{number}:p{i}",
                    ordinal=ordinal + i,
                    text=f"Source {number} paragraph {i} holds a line worth quoting.",
                )
                for i in range(paragraphs_per_source)
            ]
        )
    for number in range(n_contexts):
        query = Query.objects.create(
            collection=collection,
            external_id=f"c{number}",
            ordinal=number,
            metadata={"title": f"Article {number}"},
            left_context=[f"Article {number} sentence {j} leads up to a quotation." for j in range(4)],
        )
        add_qrels(query, {collection.passages.get(external_id=f"s{number}:p0"): 1})
    return collection


# --- the annotator API, as tests call it -------------------------------------------------------


def next_url(study) -> str:
    return f"/api/annotate/{study.pk}/next/"


def submit_url(study) -> str:
    return f"/api/annotate/{study.pk}/submit/"


def gold_position(item_id: int) -> int:
    """The display position of a proxy item's gold candidate (what a perfect annotator picks)."""
    return ItemCandidate.objects.get(item_id=item_id, is_gold=True).position


# --- studies at scale (growth guards, export tests, benchmarks/paper_scale.py) -----------------


def make_bulk_proxy_study(
    items: int,
    *,
    candidates: int = 3,
    judgments_per_item: int = 3,
    gold_share: float = 0.8,
    seed: int = 0,
    batch_size: int = 5000,
    with_judgments: bool = True,
) -> Study:
    """A proxy study of `items` items written straight into the tables with bulk_create (no
    per-row queries, so 100K items take seconds): per item a fresh query, `candidates` fresh
    passages with the gold at a seeded position and the negatives from a BM25 run (whose hits
    on them are stored), and `judgments_per_item` imported judgments by as many annotators, each
    choosing the gold with probability `gold_share` (none with `with_judgments=False`)."""
    rng = np.random.default_rng(seed)
    tag = next(_sequence)
    collection = make_collection(f"bulk-{tag}")
    run = make_run(collection, name=f"bulk-bm25-{tag}")
    study = Study.objects.create(
        name=f"bulk-study-{tag}",
        kind=Study.Kind.PROXY,
        collection=collection,
        negatives_run=run,
        candidates_per_item=candidates,
        judgments_per_item=judgments_per_item,
    )
    queries = Query.objects.bulk_create(
        [Query(collection=collection, external_id=f"q{i}", text=f"query {i}", ordinal=i) for i in range(items)],
        batch_size=batch_size,
    )
    passages = Passage.objects.bulk_create(
        [
            Passage(collection=collection, external_id=f"p{i}", text=f"passage {i}", ordinal=i)
            for i in range(items * candidates)
        ],
        batch_size=batch_size,
    )
    study_items = Item.objects.bulk_create(
        [Item(study_id=study.pk, query_id=query.pk, position=position) for position, query in enumerate(queries)],
        batch_size=batch_size,
    )
    gold = rng.integers(0, candidates, size=items).tolist()
    shown, hits = [], []
    for row, item in enumerate(study_items):
        rank = itertools.count(1)
        for position in range(candidates):
            passage_id = passages[row * candidates + position].pk
            is_gold = position == gold[row]
            shown.append(
                ItemCandidate(
                    item_id=item.pk,
                    passage_id=passage_id,
                    position=position,
                    is_gold=is_gold,
                    source_run_id=None if is_gold else run.pk,
                    source_rank=None if is_gold else next(rank),
                )
            )
            hits.append(
                Hit(run_id=run.pk, query_id=item.query_id, passage_id=passage_id, rank=position + 1, score=-position)
            )
    shown = ItemCandidate.objects.bulk_create(shown, batch_size=batch_size)
    Hit.objects.bulk_create(hits, batch_size=batch_size)
    if not with_judgments:
        analyze_after_bulk_load()
        return study
    # Without a password: hashing one costs more than a thousand rows.
    annotators = [
        get_user_model().objects.create(username=f"bulk-{tag}-annotator-{n}") for n in range(judgments_per_item)
    ]
    chose_gold = rng.random((items, judgments_per_item)) < gold_share
    other = rng.integers(1, candidates, size=(items, judgments_per_item))
    judgments = [
        Judgment(
            item_id=item.pk,
            study_id=study.pk,
            item_role=item.role,
            annotator_id=annotator.pk,
            choice_id=shown[
                row * candidates + (gold[row] if chose_gold[row, n] else (gold[row] + other[row, n]) % candidates)
            ].pk,
            source=Judgment.Source.IMPORT,
            seconds=10.0,
        )
        for row, item in enumerate(study_items)
        for n, annotator in enumerate(annotators)
    ]
    Judgment.objects.bulk_create(judgments, batch_size=batch_size)
    refresh_live_counts(study, study.items.all())
    analyze_after_bulk_load()
    return study


def analyze_after_bulk_load() -> None:
    """Refresh Postgres's table statistics, as the platform's own bulk writes do
    (retrieval.planner): make_bulk_proxy_study writes straight into the tables, and a test's rows
    are never committed, so autovacuum never sees them either. Postgres would plan the 10K-item
    study's queries for the near-empty tables earlier tests left (minutes)."""
    refresh_statistics(Query, Passage, Item, ItemCandidate, Hit, Judgment)


def make_webhook(url: str, secret: str, **fields) -> Webhook:
    """A webhook written straight to the table, past registration's checks (a hook registered
    before them, or one whose URL no test may resolve), with its secret sealed as registration
    seals it."""
    return Webhook.objects.create(url=url, sealed_secret=seal(secret), secret_hint=hint(secret), **fields)


# --- preference studies (tests/annotation/test_preference_*.py, tests/evaluation/test_preference_*.py) ----


def make_preference_collection(n_queries: int = 2, n_passages: int = 6) -> tuple[Collection, Run]:
    """BEIR-style passages d0.. and queries q0..; one finished run ranking every passage for every
    query (d0 first), so a study of depth n pools d0..d{n-1}."""
    collection = make_label_collection(n_queries, n_passages)
    passages = list(collection.passages.order_by("ordinal"))
    run = make_scored_run(
        collection,
        {query: {p: float(n_passages - i) for i, p in enumerate(passages)} for query in collection.queries.all()},
    )
    return collection, run


def make_preference_study(*, n_queries: int = 2, n_passages: int = 6, depth: int | None = None, **settings) -> Study:
    """A preference study built through create_preference_study on make_preference_collection."""
    from annotation.services import create_preference_study

    collection, run = make_preference_collection(n_queries, n_passages)
    settings.setdefault("name", f"preference-{next(_sequence)}")
    return create_preference_study(collection=collection, runs=[run], depth=depth or n_passages, **settings).study
