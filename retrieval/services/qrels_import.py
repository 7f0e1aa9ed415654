"""Qrels into an existing collection: TREC lines (`qid 0 docid relevance`, whitespace-separated)
or BEIR's tab-separated file with its `query-id corpus-id score` header.

Every line is checked before anything is written (one transaction): known query and passage
external ids, an integer relevance in ASCII digits within the column's 32 bits (as import_beir),
no pair given twice with different relevance, no pair already stored with another relevance
(qrels are not silently rewritten). Runs score their queries against the qrels there were when
they ran, so a collection that has runs is refused: its stored ranks and metrics would go stale."""

from __future__ import annotations

from pathlib import Path

from django.db import transaction

from jobs.progress import Progress, no_progress

from ..errors import InputError
from ..input_rules import column_range, parse_integer, read_lines
from ..models import Collection, Qrel

# The header line of BEIR's qrels files (import_beir requires it; a TREC qrels file may start with it).
QRELS_HEADER = ["query-id", "corpus-id", "score"]


def read_qrels_file(collection: Collection, path: str | Path) -> dict[tuple[int, int], tuple[int, int]]:
    """(query pk, passage pk) -> (relevance, line) for every line of a TREC qrels file (`qid 0
    docid relevance` or `qid docid relevance`, BEIR's header allowed) on `collection`; the first
    bad line is an InputError naming the file, the line and the field. Nothing is written."""
    file = str(path)
    queries = dict(collection.queries.values_list("external_id", "pk"))
    passages = dict(collection.passages.values_list("external_id", "pk"))
    wanted: dict[tuple[int, int], tuple[int, int]] = {}
    for line, row in read_lines(Path(path)):
        columns = row.split()
        if not columns or (line == 1 and columns == QRELS_HEADER):
            continue
        if len(columns) == 4:
            query_id, _iteration, passage_id, relevance_text = columns
        elif len(columns) == 3:
            query_id, passage_id, relevance_text = columns
        else:
            raise InputError(
                f"expected 'qid 0 docid relevance' (or 'query-id corpus-id score'), got {len(columns)} columns",
                file=file,
                line=line,
            )
        if query_id not in queries:
            raise InputError(f"unknown query id '{query_id}'", file=file, line=line, field="query-id")
        if passage_id not in passages:
            raise InputError(f"unknown passage id '{passage_id}'", file=file, line=line, field="corpus-id")
        relevance = parse_integer(
            relevance_text, field="relevance", file=file, line=line, bounds=column_range(Qrel, "relevance")
        )
        pair = (queries[query_id], passages[passage_id])
        if pair in wanted and wanted[pair][0] != relevance:
            raise InputError(
                f"conflicts with relevance {wanted[pair][0]} on line {wanted[pair][1]}",
                file=file,
                line=line,
                field="relevance",
            )
        wanted.setdefault(pair, (relevance, line))
    if not wanted:
        raise InputError("no qrels", file=file)
    return wanted


def import_qrels(collection: Collection, path: str | Path, *, progress: Progress = no_progress) -> dict:
    """Add the file's qrels to `collection`; returns counts of added and already present pairs."""
    file = str(path)
    if collection.runs.exists():
        raise InputError(
            f"collection '{collection.name}' has runs, whose ranks and metrics were computed with its"
            " current qrels; import qrels into a collection without runs (or delete its runs first)",
            file=file,
        )
    progress(0.0, "reading qrels")
    wanted = read_qrels_file(collection, path)
    stored = {
        (query, passage): relevance
        for query, passage, relevance in Qrel.objects.filter(query__collection=collection).values_list(
            "query_id", "passage_id", "relevance"
        )
    }
    for pair, (relevance, line) in wanted.items():
        if pair in stored and stored[pair] != relevance:
            raise InputError(
                f"this pair is already stored with relevance {stored[pair]}", file=file, line=line, field="relevance"
            )
    new = [Qrel(query_id=q, passage_id=p, relevance=r) for (q, p), (r, _line) in wanted.items() if (q, p) not in stored]
    progress(0.5, f"writing {len(new)} qrels")
    with transaction.atomic():
        Qrel.objects.bulk_create(new)
    progress(1.0, "done")
    return {"collection": collection.name, "qrels": len(new), "already_present": len(wanted) - len(new)}
