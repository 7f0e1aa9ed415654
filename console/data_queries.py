"""The data manager's reads of queries: a run's queries (its per-query results, with a query's
ranking and the judgments and qrels beside it) and a collection's queries (with their qrels,
the study items built on them and every run's result). Staff only. Pages and REST call these.

As for items (console/data_selectors.py): filters are conditions the database evaluates over
indexed columns, pages are cut by the database, and only a page's rows are read in full."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from django.core.paginator import Paginator
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet

from annotation.label_schema import study_schema
from annotation.models import Item, ItemCandidate, Judgment, Study
from annotation.selectors import preview, query_display_text
from annotation.ui_selectors import describe_answer
from console.data_filters import YES_NO, TableFilters, choice, page_number, per_page, text, whole_number
from console.data_selectors import search_condition, with_context_text
from retrieval.errors import InputError
from retrieval.models import Collection, Hit, Passage, PoolEntry, Qrel, Query, Run, RunQuery

# Each sort and how the page names it.
RUN_QUERY_SORTS = {
    "collection": "collection order",
    "rank": "best relevant rank, best first",
    "-rank": "best relevant rank, worst first",
    "candidates": "fewest candidates first",
    "-candidates": "most candidates first",
}
COLLECTION_QUERY_SORTS = {"collection": "collection order", "id": "external id", "-id": "external id, descending"}
JUMP_BY = {"position": "position", "query": "external id"}
# The collection table's yes/no filters and how the page names them.
COLLECTION_YES_NO = {
    "qrels": "Has qrels",
    "relevant": "Has a relevant qrel",
    "studied": "In a study",
    "pooled": "Has its own pool",
}


def _live_study_judgments(collection_id: int, query_ref) -> QuerySet[Judgment]:
    return Judgment.objects.filter(item__query=query_ref, item__study__collection_id=collection_id, voided=False)


def _yes_no(queryset: QuerySet, value: str, condition) -> QuerySet:
    if not value:
        return queryset
    return queryset.filter(condition if value == "yes" else ~condition)


# --- a run's queries ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RunQueryFilters(TableFilters):
    """A run's queries: `relevant` (the query has a relevant passage in the run's candidate set),
    `min_rank` / `max_rank` (its best relevant passage's exact rank within), `split`,
    `quote_length`, `judged` (a study item on the query has a live human judgment), `search` in
    the query's external id, text and context, `sort` (RUN_QUERY_SORTS; default collection order)."""

    relevant: str = ""
    min_rank: int | None = None
    max_rank: int | None = None
    split: str = ""
    quote_length: int | None = None
    judged: str = ""


def run_query_filters(params) -> RunQueryFilters:
    return RunQueryFilters(
        relevant=choice(params, "relevant", YES_NO),
        min_rank=whole_number(params, "min_rank", low=1),
        max_rank=whole_number(params, "max_rank", low=1),
        split=text(params, "split", 20),
        quote_length=whole_number(params, "quote_length", low=1, high=32767),
        judged=choice(params, "judged", YES_NO),
        search=text(params, "search"),
        sort=choice(params, "sort", tuple(RUN_QUERY_SORTS)),
    )


def filtered_run_queries(run: Run, filters: RunQueryFilters) -> QuerySet[RunQuery]:
    results = RunQuery.objects.filter(run=run)
    results = _yes_no(results, filters.relevant, Q(gold_rank__isnull=False))
    if filters.min_rank is not None:
        results = results.filter(gold_rank__gte=filters.min_rank)
    if filters.max_rank is not None:
        results = results.filter(gold_rank__lte=filters.max_rank)
    if filters.split:
        results = results.filter(query__split=filters.split)
    if filters.quote_length is not None:
        results = results.filter(query__quote_length=filters.quote_length)
    judged = Exists(_live_study_judgments(run.collection_id, OuterRef("query_id")))
    results = _yes_no(results, filters.judged, judged)
    if filters.search:
        results = with_context_text(results, "query__").filter(search_condition(filters.search, "query__"))
    order = {
        "rank": (F("gold_rank").asc(nulls_last=True),),
        "-rank": (F("gold_rank").desc(nulls_last=True),),
        "candidates": ("candidates",),
        "-candidates": ("-candidates",),
    }.get(filters.sort, ())
    return results.order_by(*order, "query__ordinal", "query_id")


def run_query_table(run: Run, params) -> dict:
    filters = run_query_filters(params)
    ids = filtered_run_queries(run, filters).values_list("pk", flat=True)
    page = Paginator(ids, per_page(params)).get_page(page_number(params))
    return {"filters": filters, "rows": run_query_rows(run, list(page)), "page": page}


def run_query_rows(run: Run, result_ids: list[int]) -> list[dict]:
    """Rows of these per-query results, in this order: the query (external id, a preview, split,
    quote length), its candidate set's size, hits stored, relevant passages, the best one's
    exact rank and how many live human judgments the collection's studies hold on it."""
    results = {result.pk: result for result in RunQuery.objects.filter(pk__in=result_ids).select_related("query")}
    query_ids = [results[pk].query_id for pk in result_ids]
    stored = _count_by_query(Hit.objects.filter(run=run), query_ids)
    judged = _count_by_query(
        Judgment.objects.filter(item__study__collection=run.collection_id, voided=False), query_ids, "item__query_id"
    )
    rows = []
    for pk in result_ids:
        result = results[pk]
        query = result.query
        rows.append(
            {
                "result": pk,
                "query": query.pk,
                "external_id": query.external_id,
                "preview": preview(query_display_text(query, 1, 1)),
                "split": query.split,
                "quote_length": query.quote_length,
                "candidates": result.candidates,
                "hits": stored.get(query.pk, 0),
                "relevant": len(result.relevant_ranks),
                "best_rank": result.gold_rank,
                "judgments": judged.get(query.pk, 0),
            }
        )
    return rows


def _jump(queries: QuerySet, params) -> int:
    """The query id that `jump` names among `queries` (ordered as the table numbers them): its
    position from 1, or with `jump_by=query` its external id."""
    by = choice(params, "jump_by", tuple(JUMP_BY)) or "position"
    if by == "query":
        name = text(params, "jump", 300)
        found = queries.filter(external_id=name).values_list("pk", flat=True).first() if name else None
    else:
        number = whole_number(params, "jump", low=1)
        found = None if number is None else queries.values_list("pk", flat=True)[number - 1 : number].first()
    if found is None:
        raise InputError("no such query here: give its position or, by query, its external id", field="jump")
    return found


def run_query_jump(run: Run, params) -> Query:
    """The run's query `jump` names (a position in collection order, or an external id)."""
    ranked = Query.objects.filter(pk__in=RunQuery.objects.filter(run=run).values("query_id"))
    return Query.objects.get(pk=_jump(ranked.order_by("ordinal", "pk"), params))


def run_query_detail(run: Run, query: Query) -> dict:
    """One query of a run: the query as written, the run's stored ranking (rank, score, passage)
    with, beside each passage, the collection's qrel and the human judgments the collection's
    studies hold on it, then the relevant passages ranked past the stored hits (exact ranks)."""
    result = RunQuery.objects.filter(run=run, query=query).first()
    qrels = dict(Qrel.objects.filter(query=query).values_list("passage_id", "relevance"))
    judged = passage_judgments(run.collection_id, query)
    hits = Hit.objects.filter(run=run, query=query).select_related("passage").order_by("rank")
    ranking = [
        {
            "rank": hit.rank,
            "score": hit.score,
            "passage": hit.passage.external_id,
            "title": hit.passage.title,
            "text": hit.passage.text,
            "qrel": qrels.get(hit.passage_id),
            "judgments": judged.get(hit.passage_id, []),
        }
        for hit in hits
    ]
    shown = {hit.passage_id for hit in hits}
    ranks = (result.relevant_ranks if result else {}) or {}
    beyond_ids = [int(pk) for pk in ranks if int(pk) not in shown]
    passages = Passage.objects.in_bulk(beyond_ids)
    beyond = sorted(
        (
            {
                "rank": ranks[str(pk)],
                "passage": passages[pk].external_id,
                "text": passages[pk].text,
                "qrel": qrels.get(pk),
                "judgments": judged.get(pk, []),
            }
            for pk in beyond_ids
            if pk in passages
        ),
        key=lambda entry: entry["rank"],
    )
    return {
        "query": query.pk,
        "external_id": query.external_id,
        "text": query_display_text(query, len(query.left_context), len(query.right_context)),
        "split": query.split,
        "quote_length": query.quote_length,
        "candidates": result.candidates if result else None,
        "best_rank": result.gold_rank if result else None,
        "ranking": ranking,
        "relevant_beyond_depth": beyond,
    }


def passage_judgments(collection_id: int, query: Query) -> dict[int, list[dict]]:
    """passage id -> what the collection's studies' annotators said about it for `query`, one
    entry per study item showing it: proxy items "chosen by k of n", label items each live
    annotator's label, multi-select items "selected by k of n"."""
    items = {
        item.pk: item
        for item in Item.objects.filter(query=query, study__collection_id=collection_id).select_related("study")
    }
    shown = ItemCandidate.objects.filter(item_id__in=items).values_list("item_id", "position", "passage_id")
    by_item = defaultdict(dict)
    for item_id, position, passage_id in shown:
        by_item[item_id][position] = passage_id
    given = defaultdict(list)
    judgments = Judgment.objects.filter(item_id__in=items, voided=False).values_list(
        "item_id", "annotator__username", "choice__position", "label", "selections"
    )
    for item_id, annotator, position, label, selections in judgments:
        given[item_id].append((annotator, position, label, selections or []))
    found = defaultdict(list)
    schemas: dict[int, dict] = {}  # one normalised schema per study, not one per item and passage
    for item_id, positions in by_item.items():
        study: Study = items[item_id].study
        answers = given[item_id]
        if study.pk not in schemas:
            schemas[study.pk] = study_schema(study)
        for position, passage_id in positions.items():
            found[passage_id].append(
                {
                    "study": study.pk,
                    "study_name": study.name,
                    "item": item_id,
                    "summary": _what_they_said(study, schemas[study.pk], position, answers),
                }
            )
    return found


def _what_they_said(study: Study, schema: dict, position: int, answers: list[tuple]) -> str:
    if not answers:
        return "not judged yet"
    if study.kind == Study.Kind.PROXY:
        chosen = sum(1 for _, chose, _, _ in answers if chose == position)
        return f"chosen by {chosen} of {len(answers)}"
    if schema["multi_select"]:
        chosen = sum(1 for *_, selections in answers if position in selections)
        return f"selected by {chosen} of {len(answers)}"
    return ", ".join(f"{name}: {describe_answer(study, schema, label=label)}" for name, _, label, _ in answers)


# --- a collection's queries --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CollectionQueryFilters(TableFilters):
    """A collection's queries: `split`, `qrels` (it has any qrel), `relevant` (a qrel above 0),
    `studied` (a study item is built on it), `pooled` (it carries its own candidate pool),
    `search` in its external id, text and context, `sort` (COLLECTION_QUERY_SORTS)."""

    split: str = ""
    qrels: str = ""
    relevant: str = ""
    studied: str = ""
    pooled: str = ""


def collection_query_filters(params) -> CollectionQueryFilters:
    return CollectionQueryFilters(
        split=text(params, "split", 20),
        qrels=choice(params, "qrels", YES_NO),
        relevant=choice(params, "relevant", YES_NO),
        studied=choice(params, "studied", YES_NO),
        pooled=choice(params, "pooled", YES_NO),
        search=text(params, "search"),
        sort=choice(params, "sort", tuple(COLLECTION_QUERY_SORTS)),
    )


def filtered_collection_queries(collection: Collection, filters: CollectionQueryFilters) -> QuerySet[Query]:
    queries = Query.objects.filter(collection=collection)
    if filters.split:
        queries = queries.filter(split=filters.split)
    queries = _yes_no(queries, filters.qrels, Exists(Qrel.objects.filter(query=OuterRef("pk"))))
    queries = _yes_no(queries, filters.relevant, Exists(Qrel.objects.filter(query=OuterRef("pk"), relevance__gt=0)))
    queries = _yes_no(queries, filters.studied, Exists(Item.objects.filter(query=OuterRef("pk"))))
    queries = _yes_no(queries, filters.pooled, Exists(PoolEntry.objects.filter(query=OuterRef("pk"))))
    if filters.search:
        queries = with_context_text(queries).filter(search_condition(filters.search))
    order = {"id": ("external_id",), "-id": ("-external_id",)}.get(filters.sort, ("ordinal", "pk"))
    return queries.order_by(*order)


def collection_query_table(collection: Collection, params) -> dict:
    filters = collection_query_filters(params)
    ids = filtered_collection_queries(collection, filters).values_list("pk", flat=True)
    page = Paginator(ids, per_page(params)).get_page(page_number(params))
    return {"filters": filters, "rows": collection_query_rows(list(page)), "page": page}


def _count_by_query(queryset: QuerySet, query_ids: list[int], field: str = "query_id") -> dict[int, int]:
    rows = queryset.filter(**{f"{field}__in": query_ids}).order_by().values(field).annotate(n=Count("pk"))
    return dict(rows.values_list(field, "n"))


def collection_query_rows(query_ids: list[int]) -> list[dict]:
    """Rows of these queries, in this order: external id, a preview, split, qrels (all and
    relevant), study items built on it, its pool's size."""
    queries = Query.objects.in_bulk(query_ids)
    qrels = _count_by_query(Qrel.objects.all(), query_ids)
    relevant = _count_by_query(Qrel.objects.filter(relevance__gt=0), query_ids)
    items = _count_by_query(Item.objects.all(), query_ids)
    pools = _count_by_query(PoolEntry.objects.all(), query_ids)
    return [
        {
            "query": pk,
            "external_id": queries[pk].external_id,
            "preview": preview(query_display_text(queries[pk], 1, 1)),
            "split": queries[pk].split,
            "qrels": qrels.get(pk, 0),
            "relevant": relevant.get(pk, 0),
            "items": items.get(pk, 0),
            "pool": pools.get(pk, 0),
        }
        for pk in query_ids
    ]


def collection_query_jump(collection: Collection, params) -> Query:
    queries = Query.objects.filter(collection=collection).order_by("ordinal", "pk")
    return Query.objects.get(pk=_jump(queries, params))


def collection_query_detail(collection: Collection, query: Query) -> dict:
    """One query of a collection: its text and context, metadata, qrels (with the passages), the
    study items built on it (with their live judgments) and each finished run's result for it."""
    qrels = Qrel.objects.filter(query=query).select_related("passage").order_by("-relevance", "passage__ordinal")
    items = Item.objects.filter(query=query).select_related("study").order_by("study_id", "position")
    results = (
        RunQuery.objects.filter(query=query, run__status=Run.Status.DONE)
        .select_related("run__retriever")
        .order_by("run_id")
    )
    return {
        "query": query.pk,
        "external_id": query.external_id,
        "text": query_display_text(query, len(query.left_context), len(query.right_context)),
        "split": query.split,
        "quote_length": query.quote_length,
        "metadata": query.metadata,
        "qrels": [
            {"passage": qrel.passage.external_id, "relevance": qrel.relevance, "text": qrel.passage.text}
            for qrel in qrels
        ],
        "items": [
            {
                "study": item.study_id,
                "study_name": item.study.name,
                "item": item.pk,
                "number": item.position + 1,
                "judgments": item.live_judgments,  # stored, kept by every writer (live_counts.py)
                "needed": item.study.judgments_per_item,
            }
            for item in items
        ],
        "runs": [
            {
                "run": result.run_id,
                "retriever": result.run.retriever.name,
                "candidates": result.candidates,
                "best_rank": result.gold_rank,
            }
            for result in results
        ],
    }
