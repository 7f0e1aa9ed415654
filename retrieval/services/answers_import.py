"""Generated answers (a RAG system's, an LLM's) into a collection of kind "answers", so people can
judge which system's answer they prefer (a preference study over the systems' runs).

JSONL, one answer per line: `{"query": query id, "system": name, "text": the answer}`, and
`"query_text"` for a query the collection does not hold yet and `queries_from` does not either.
Each answer becomes a passage (external id `SYSTEM/QUERY`; no title, so nothing shown names the
system), each query's answers its pool (file order), and each system a finished run of the
collection named after it, ranking its one answer per query (the staff-only provenance a
preference study's candidates keep: annotators never see which system wrote what). Queries new to
the collection are copied from the `queries_from` collection (text, context, metadata, split), or
made from the row's `query_text`.

All or nothing, checked before anything is written: one system answering one query twice, a
system already imported into the collection, an empty or non-text field: one line naming the
file, line and field.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from django.db import transaction
from django.db.models import Max

from jobs.progress import Progress, no_progress

from ..errors import InputError
from ..input_rules import read_jsonl
from ..models import Collection, Passage, PoolEntry, Query
from .external_runs import imported_retriever, save_ranked_run

MAX_NAME = 190  # a system's name becomes a run name (200) and a retriever name ("imported " + it)


def import_answers(
    path: str | Path,
    *,
    collection_name: str,
    queries_from: Collection | None = None,
    progress: Progress = no_progress,
) -> dict:
    """Read the answers into the collection named (created, kind "answers", if it is new); see
    the module docstring. Returns `collection`, `systems` (name -> run id), `queries`, `answers`."""
    path, file = Path(path), str(path)
    collection = Collection.objects.filter(name=collection_name).first()
    if collection is not None and collection.kind != Collection.Kind.ANSWERS:
        raise InputError(
            f"collection '{collection_name}' holds {collection.kind} data; answers go into an answers collection",
            field="collection",
        )
    progress(0.0, "reading answers")
    rows = _rows(path, file)
    known = dict(collection.queries.values_list("external_id", "pk")) if collection else {}
    sources = {}
    if queries_from is not None:
        sources = {
            query.external_id: query for query in queries_from.queries.filter(external_id__in={r[1] for r in rows})
        }
    taken = set(collection.runs.values_list("name", flat=True)) if collection else set()
    for line, query, system, _text, query_text in rows:
        if system in taken:
            raise InputError(
                f"system '{system}' was imported into '{collection_name}' before", file=file, line=line, field="system"
            )
        if query not in known and query not in sources and not query_text:
            where = f" nor in '{queries_from.name}'" if queries_from else ""
            raise InputError(
                f"query '{query}' is not in '{collection_name}'{where}: give its text as query_text",
                file=file,
                line=line,
                field="query",
            )
    with transaction.atomic():
        if collection is None:
            collection = Collection.objects.create(name=collection_name, kind=Collection.Kind.ANSWERS, source=file)
        queries = _queries(collection, rows, sources)
        passages = _passages(collection, rows, queries)
        runs = {}
        by_system: dict[str, dict[Query, list]] = defaultdict(dict)
        for _line, query, system, _text, _query_text in rows:
            by_system[system][queries[query]] = [(passages[system, query], 1.0)]
        for number, (system, rankings) in enumerate(by_system.items()):
            run = save_ranked_run(
                collection,
                name=system,
                retriever=imported_retriever(system),
                rankings=rankings,
                parameters={"answers": file},
                queries=list(rankings),
            )
            runs[system] = run.pk
            progress((number + 1) / len(by_system), f"{number + 1}/{len(by_system)} systems stored")
    return {
        "collection": collection.name,
        "systems": runs,
        "queries": len({query for _, query, *_ in rows}),
        "answers": len(rows),
    }


def _rows(path: Path, file: str) -> list[tuple[int, str, str, str, str]]:
    """(line, query, system, text, query text) per answer, every field checked."""
    rows, seen = [], {}
    for line, data in read_jsonl(path):

        def text_of(field: str, *, required: bool = True, limit: int | None = None, line=line, data=data) -> str:
            value = data.get(field, "" if not required else None)
            if not isinstance(value, str) or (required and not value.strip()):
                raise InputError("must be a non-empty text", file=file, line=line, field=field)
            value = value.strip()  # read_jsonl already refused NUL characters and lone surrogates
            if limit is not None and len(value) > limit:
                raise InputError(f"at most {limit} characters", file=file, line=line, field=field)
            return value

        query, system = text_of("query", limit=300), text_of("system", limit=MAX_NAME)
        if "/" in system:
            raise InputError("a system's name may not hold '/'", file=file, line=line, field="system")
        answer, query_text = text_of("text"), text_of("query_text", required=False)
        if (system, query) in seen:
            raise InputError(
                f"system '{system}' answers query '{query}' twice (first on line {seen[system, query]})",
                file=file,
                line=line,
                field="query",
            )
        seen[system, query] = line
        rows.append((line, query, system, answer, query_text))
    if not rows:
        raise InputError("the file has no answers", file=file)
    return rows


def _queries(collection: Collection, rows, sources: dict[str, Query]) -> dict[str, Query]:
    """Every query the rows answer, in the collection (new ones copied or made from query_text)."""
    found = {query.external_id: query for query in collection.queries.filter(external_id__in={r[1] for r in rows})}
    ordinal = (collection.queries.aggregate(last=Max("ordinal"))["last"] or 0) + 1
    for _line, external_id, _system, _text, query_text in rows:
        if external_id in found:
            continue
        source = sources.get(external_id)
        fields = {"text": query_text}
        if source is not None:
            fields = {
                "text": source.text,
                "left_context": source.left_context,
                "right_context": source.right_context,
                "split": source.split,
                "metadata": source.metadata,
            }
        found[external_id] = Query.objects.create(
            collection=collection, external_id=external_id, ordinal=ordinal, **fields
        )
        ordinal += 1
    return found


def _passages(collection: Collection, rows, queries: dict[str, Query]) -> dict[tuple[str, str], int]:
    """One passage per answer (external id SYSTEM/QUERY), and each query's pool of its answers."""
    start = (collection.passages.aggregate(last=Max("ordinal"))["last"] or 0) + 1
    created = Passage.objects.bulk_create(
        [
            Passage(collection=collection, external_id=f"{system}/{query}", text=text, ordinal=start + index)
            for index, (_line, query, system, text, _query_text) in enumerate(rows)
        ]
    )
    passages = {(system, query): passage.pk for (_l, query, system, _t, _q), passage in zip(rows, created, strict=True)}
    positions = dict(
        PoolEntry.objects.filter(query__in=queries.values())
        .values("query_id")
        .annotate(last=Max("position"))
        .values_list("query_id", "last")
    )
    entries = []
    for _line, query, system, _text, _query_text in rows:
        query_id = queries[query].pk
        positions[query_id] = positions.get(query_id, -1) + 1
        entries.append(PoolEntry(query_id=query_id, passage_id=passages[system, query], position=positions[query_id]))
    PoolEntry.objects.bulk_create(entries)
    return passages
