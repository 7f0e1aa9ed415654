"""TREC run files in: `qid Q0 docid rank score tag`, whitespace-separated, any depth, read and
checked whole before anything is stored (then `save_ranked_run` stores it in one transaction).

Decisions (each bad input is one line naming the file, the line and the field):
- Order: as trec_eval, by score descending and ties by docid descending; the rank column is not
  used to order, but it must agree with the scores: a line ranked below another (a larger rank)
  with a strictly higher score is refused, because evaluation tools would read the file in a
  different order than its writer meant. Equal ranks or equal scores (ties) are accepted.
- The second column ("Q0") is ignored, as trec_eval ignores it.
- One tag per file: a file with several tags (several systems) is refused, naming the line of
  the second tag; split it (`awk '$6 == "TAG"'`) and import each part under its own name.
- Query and passage ids must all be the collection's; unknown ones are refused with their count
  and the first few. A (qid, docid) pair may appear only once. Scores must be finite numbers,
  ranks whole numbers. An empty file (no run lines) is refused.
"""

from __future__ import annotations

import itertools
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from celery import signature
from django.conf import settings
from django.db import transaction

from jobs.models import Job
from jobs.progress import Progress, no_progress
from jobs.services import create_job, dispatch
from retrieval.errors import InputError
from retrieval.models import Collection, Run

from ..input_rules import parse_integer, parse_real, read_lines
from .external_runs import check_run_name, save_ranked_run

SHOWN_UNKNOWN = 5


@dataclass
class RunLine:
    line: int
    docid: str
    rank: int
    score: float


@dataclass
class TrecRun:
    """A parsed run file: lines per query id in file order, and the file's one tag."""

    path: str
    tag: str = ""
    queries: dict[str, list[RunLine]] = field(default_factory=dict)


def parse_trec_run(path: Path | str, label: str | None = None) -> TrecRun:
    """Read and check a TREC run file's syntax, duplicates, tags and rank/score order. Errors
    name the file as `label` (an upload's own name) or its path."""
    path = Path(path)
    file = label or str(path)
    run = TrecRun(file)
    tag_line = 0
    seen: dict[tuple[str, str], int] = {}
    for number, text in read_lines(path):
        columns = text.split()
        if not columns:
            continue
        if len(columns) != 6:
            raise InputError(
                f"expected 6 columns (qid Q0 docid rank score tag), found {len(columns)}",
                file=file,
                line=number,
                field="columns",
            )
        qid, _, docid, rank, score, tag = columns
        rank = parse_integer(rank, field="rank", file=file, line=number)
        score = parse_real(score, field="score", file=file, line=number)
        if not run.tag:
            run.tag, tag_line = tag, number
        elif tag != run.tag:
            raise InputError(
                f"a second tag {tag!r} (line {tag_line} has {run.tag!r}): import one tag per file",
                file=file,
                line=number,
                field="tag",
            )
        if (qid, docid) in seen:
            raise InputError(
                f"query {qid} lists passage {docid} again (first on line {seen[qid, docid]})",
                file=file,
                line=number,
                field="docid",
            )
        seen[qid, docid] = number
        run.queries.setdefault(qid, []).append(RunLine(number, docid, rank, score))
    if not run.queries:
        raise InputError("the file has no run lines", file=file, field="file")
    for lines in run.queries.values():
        _check_rank_order(lines, file)
    return run


def _check_rank_order(lines: list[RunLine], file: str) -> None:
    """Refuse a query whose rank column contradicts its scores (a larger rank, a higher score)."""
    by_rank = sorted(lines, key=lambda entry: (entry.rank, -entry.score))
    for above, below in itertools.pairwise(by_rank):
        if below.score > above.score and below.rank > above.rank:
            raise InputError(
                f"rank {below.rank} has score {below.score!r}, above rank {above.rank}'s {above.score!r}"
                f" (line {above.line}); trec_eval orders by score, then docid, so the ranks contradict it",
                file=file,
                line=below.line,
                field="rank",
            )


def _unknown(ids: dict[str, int], known: dict[str, int], what: str, file: str, name: str) -> None:
    """Refuse ids (id -> first line) the collection does not have: their count and the first few."""
    unknown = [identifier for identifier in ids if identifier not in known]
    if unknown:
        first = ", ".join(unknown[:SHOWN_UNKNOWN])
        raise InputError(
            f"{len(unknown)} {what} ids are not in the collection (first: {first})",
            file=file,
            line=ids[unknown[0]],
            field=name,
        )


def read_trec_rankings(
    collection: Collection, path: Path | str, label: str | None = None
) -> tuple[TrecRun, dict[int, list]]:
    """The file's rankings on the collection's ids (query pk -> [(passage pk, score)]), every
    line checked; nothing is written. The REST API calls it before queueing an import, so bad
    input is a 400 rather than a failed job."""
    trec = parse_trec_run(path, label)
    query_lines = {qid: lines[0].line for qid, lines in trec.queries.items()}
    docid_lines: dict[str, int] = {}
    for lines in trec.queries.values():
        for entry in lines:
            docid_lines.setdefault(entry.docid, entry.line)
    # All ids at once: an IN list of a deep run's docids would pass SQLite's parameter limit.
    queries = dict(collection.queries.values_list("external_id", "pk"))
    _unknown(query_lines, queries, "query", trec.path, "qid")
    passages = dict(collection.passages.values_list("external_id", "pk"))
    _unknown(docid_lines, passages, "passage", trec.path, "docid")
    rankings = {
        queries[qid]: [(passages[entry.docid], entry.score) for entry in lines] for qid, lines in trec.queries.items()
    }
    return trec, rankings


def import_trec_run(
    collection: Collection,
    path: Path | str,
    *,
    name: str,
    progress: Progress = no_progress,
    label: str | None = None,
) -> Run:
    """Import a TREC run file as the collection's run `name` (filed under a retriever named by
    its tag). Nothing is written unless the whole file is good."""
    check_run_name(collection, name)
    trec, rankings = read_trec_rankings(collection, path, label)
    return save_ranked_run(
        collection,
        name=name,
        retriever=trec.tag,
        rankings=rankings,
        parameters={"source": "trec", "file": label or Path(path).name, "tag": trec.tag},
        progress=progress,
    )


# The worker task that runs import_trec_run (retrieval/tasks.py), named so this module need not
# import the tasks module that imports it.
IMPORT_RUN_TASK = "retrieval.tasks.import_run"


def uploads_folder() -> Path:
    """Where uploaded run files wait for their import job (web and workers share the data dir)."""
    return Path(settings.MARGINALIA_DATA_DIR) / "uploads" / "runs"


def start_trec_import(collection: Collection, source: BinaryIO, *, filename: str, name: str, user=None) -> Job:
    """Check an uploaded run file now (bad input is refused before anything is queued), keep it
    under the data dir and queue its import on the "cpu" queue. Returns the job."""
    check_run_name(collection, name)
    folder = uploads_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{uuid.uuid4().hex}.trec"
    with path.open("wb") as copy:
        shutil.copyfileobj(source, copy)
    try:
        read_trec_rankings(collection, path, filename)
        with transaction.atomic():
            job = create_job(
                "import_run",
                "cpu",
                {"collection": collection.name, "name": name, "file": filename},
                user=user,
            )
            dispatch(job, signature(IMPORT_RUN_TASK), collection.pk, str(path), name, filename)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return job
