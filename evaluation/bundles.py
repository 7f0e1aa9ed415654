"""A test collection as a bundle a peer can load, under any qrels source (retrieval.qrels_sources):

- a BEIR folder: corpus.jsonl (`_id`, `title`, `text`), queries.jsonl (`_id`, `text`, and the
  query's metadata), qrels/<split>.tsv (`query-id corpus-id score`, one file per query split,
  "test" for queries without one) and pools.jsonl where the collection's queries have pools;
  `import_beir` reads it back;
- judgments.jsonl: one line per qrel with the labels behind it (a study's: each annotator's label
  under a pseudonym, ties and adjudications, and where the label comes from: `label_source`,
  `label_method`, as annotation.provenance names them; other sources: the qrel and its source);
- provenance.jsonl and runs.json: how each judged pair entered the pool (pool_provenance) and the
  runs it names;
- trec/: ir_datasets-style files, docs.tsv (`doc_id<TAB>text`), queries.tsv (`query_id<TAB>text`)
  and qrels (`qid 0 docid relevance`), as ir_datasets' TsvDocs, TsvQueries and TrecQrels read;
- bundle.json: what the bundle holds and where its labels came from.
The folder appears complete or not at all (written beside it, then moved into place).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, TextIO

from django.utils import timezone
from django.utils.text import slugify

from annotation.models import ItemCandidate, Study
from annotation.provenance import label_method, label_source
from annotation.selectors import pair_sources, pool_summary
from evaluation.bulk import collection_paused, json_lines, line_chunks
from evaluation.label_report import label_data
from evaluation.selectors import streamed_driver_rows
from retrieval.errors import InputError
from retrieval.models import Collection, Passage, PoolEntry, Query, Run
from retrieval.qrels_sources import Qrels
from retrieval.scoring import context_text

BEIR_QRELS_HEADER = "query-id\tcorpus-id\tscore"
Writer = Callable[[TextIO], None]


def write_folder(directory: str | Path, writers: dict[str, Writer], field: str = "out") -> Path:
    """Each file of `writers` (relative path -> function writing its text) in a new or empty
    `directory`, written in a staging folder beside it and moved into place at the end."""
    directory = Path(directory)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise InputError("must be a new or empty folder", file=str(directory), field=field)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}."))
    try:
        for name, write in writers.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("w", encoding="utf-8", newline="\n") as file:
                write(file)
        if directory.exists():
            directory.rmdir()
        os.replace(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return directory


def jsonl_writer(records: Callable[[], Iterable[dict]]) -> Writer:
    def write(file: TextIO) -> None:
        file.writelines(json_lines(records()))

    return write


def lines_writer(lines: Callable[[], Iterable[str]]) -> Writer:
    def write(file: TextIO) -> None:
        file.writelines(line_chunks(lines()))

    return write


def corpus_records(collection: Collection) -> Iterator[dict]:
    """The passages in import order, read as the driver returns them (evaluation.selectors)."""
    passages = Passage.objects.filter(collection=collection).order_by("ordinal", "pk")
    for external_id, title, text in streamed_driver_rows(passages.values_list("external_id", "title", "text")):
        yield {"_id": external_id, "title": title, "text": text}


def query_records(collection: Collection, context: tuple[int, int] | None, metadata: bool = False) -> Iterator[dict]:
    """The queries as retrieval reads them: with `context` (left, right) sentences of a RELiC
    query's context (None: all of it); with `metadata`, each query's own metadata fields. Read as
    the driver returns them, the JSON columns decoded here: through Django's converters they
    cost more than the rest of the query files."""
    queries = Query.objects.filter(collection=collection).order_by("ordinal", "pk")
    columns = ("external_id", "text", "left_context", "right_context", *(["metadata"] if metadata else []))
    for external_id, text, *encoded in streamed_driver_rows(queries.values_list(*columns)):
        left_context, right_context, *fields = map(_decoded, encoded)
        left, right = context or (len(left_context), len(right_context))
        record = {"_id": external_id, "text": context_text(text, left_context, right_context, left, right, None)}
        if fields and fields[0]:
            record["metadata"] = fields[0]
        yield record


def _decoded(text: str):
    """A JSON column's text as json.loads gives it; the empty list and object, what most queries'
    contexts and metadata hold, without the call (a third of writing the query files)."""
    return [] if text == "[]" else {} if text == "{}" else json.loads(text)


def pools(collection: Collection) -> dict[str, list[str]]:
    """query external id -> its pool's passage external ids in pool order (empty: no pools)."""
    found: dict[str, list[str]] = {}
    for query_id, passage_id in (
        PoolEntry.objects.filter(query__collection=collection)
        .order_by("query__ordinal", "query_id", "position")
        .values_list("query__external_id", "passage__external_id")
    ):
        found.setdefault(query_id, []).append(passage_id)
    return found


def beir_writers(
    collection: Collection,
    qrels: Iterable[tuple[str, str, int]],
    context: tuple[int, int] | None,
    qrels_file: Callable[[str], str] = lambda split: "qrels.tsv",
    split_of: dict[str, str] | None = None,
    metadata: bool = False,
) -> dict[str, Writer]:
    """The BEIR files of `collection` with these qrels ((query, passage, relevance) external
    ids): corpus.jsonl, queries.jsonl, the qrels file of each query split (`qrels_file(split)`,
    `split_of` query -> split, "test" where none) and pools.jsonl when the queries have pools."""
    by_file: dict[str, list[str]] = {qrels_file("test"): [BEIR_QRELS_HEADER]}  # import_beir needs it
    for query, passage, relevance in qrels:
        name = qrels_file((split_of or {}).get(query) or "test")
        by_file.setdefault(name, [BEIR_QRELS_HEADER]).append(f"{query}\t{passage}\t{relevance}")
    writers = {
        "corpus.jsonl": jsonl_writer(lambda: corpus_records(collection)),
        "queries.jsonl": jsonl_writer(lambda: query_records(collection, context, metadata)),
    }
    for name, lines in by_file.items():
        writers[name] = lines_writer(lambda lines=lines: lines)
    found_pools = pools(collection)
    if found_pools:
        writers["pools.jsonl"] = jsonl_writer(
            lambda: ({"query-id": query, "corpus-ids": ids} for query, ids in found_pools.items())
        )
    return writers


# --- what the bundle says about its labels ---------------------------------------------------------


def pool_provenance(study: Study) -> dict[tuple[str, str], list[dict]]:
    """(query external id, passage external id) -> how the pair entered the study's pool: every
    run's rank that pooled it (annotation.selectors.pair_sources: the study's Pool, whatever its
    strategy) or a collection pool's position; for a study drawn before pools (quotability), the
    sources it recorded (Study.parameters["sources"]), else the candidate's own source run and
    rank. The one place bundles read provenance from."""
    recorded = {str(item): sources for item, sources in pair_sources(study)}
    recorded = recorded or (study.parameters or {}).get("sources", {})
    provenance: dict[tuple[str, str], list[dict]] = {}
    candidates = (
        ItemCandidate.objects.filter(item__study=study)
        .order_by("item__position", "position")
        .values_list("item_id", "item__query__external_id", "passage__external_id", "source_run_id", "source_rank")
    )
    for item_id, query, passage, run_id, rank in candidates.iterator(chunk_size=5000):
        sources = recorded.get(str(item_id)) or ([{"run": run_id, "rank": rank}] if run_id is not None else [])
        found = provenance.setdefault((query, passage), [])
        found.extend(source for source in sources if source not in found)
    return provenance


def study_labels(study: Study) -> dict[tuple[str, str], dict]:
    """(query, passage) -> {"labels": each annotator's label (pseudonyms annotator-1, -2, ... in
    the order they first appear), "adjudicated": staff's decision or None}: the counted answers
    the study's qrels aggregate."""
    data = label_data(study)
    pseudonyms: dict[str, str] = {}
    labels: dict[tuple[str, str], dict] = {}
    for unit in data.units:
        pair = labels.setdefault((unit.item.query, unit.candidate.passage), {"labels": [], "adjudicated": None})
        for annotator, label in data.ratings[unit.key].items():
            name = pseudonyms.setdefault(annotator, f"annotator-{len(pseudonyms) + 1}")
            pair["labels"].append({"annotator": name, "label": label})
        if unit.key in data.adjudicated:
            pair["adjudicated"] = data.adjudicated[unit.key]
    return labels


def judgment_records(qrels: Qrels, triples: list[tuple[str, str, int]]) -> Callable[[], Iterator[dict]]:
    """judgments.jsonl: per qrel, the labels behind it where the platform holds them (a study's)."""
    study = qrels.origin if isinstance(qrels.origin, Study) else None

    def records() -> Iterator[dict]:
        behind = study_labels(study) if study is not None else {}
        method = qrels.details.get("aggregate", "majority")
        for query, passage, relevance in triples:
            record = {"query-id": query, "corpus-id": passage, "score": relevance, "source": qrels.source}
            if study is not None:
                record.update(behind.get((query, passage), {"labels": [], "adjudicated": None}))
                given = [entry["label"] for entry in record["labels"]]
                origin = label_source(given, relevance, adjudicated=record["adjudicated"] is not None)
                record.update(label_source=origin, label_method=label_method(origin, method))
            yield record

    return records


def run_descriptions(run_ids: Iterable[int]) -> dict[str, dict]:
    runs = Run.objects.filter(pk__in=set(run_ids)).select_related("retriever").order_by("pk")
    return {
        str(run.pk): {
            "name": run.name or str(run.retriever),
            "retriever": run.retriever.name,
            "kind": run.retriever.kind,
            "parameters": run.parameters,
            "tag": run.tag,
        }
        for run in runs
    }


@collection_paused()
def write_bundle(collection: Collection, qrels: Qrels, directory: str | Path) -> dict:
    """The bundle of `collection` under `qrels` in the new folder `directory` (module docstring)
    -> keys `collection`, `qrels`, `out`, `files`, `queries`, `passages`, `qrels_pairs`, `relevant`.
    Written without cyclic garbage collection (evaluation.bulk)."""
    study = qrels.origin if isinstance(qrels.origin, Study) else None
    context = (study.context_left, study.context_right) if study is not None else None
    splits = dict(streamed_driver_rows(Query.objects.filter(collection=collection).values_list("external_id", "split")))
    external = list(qrels.triples())
    writers = beir_writers(
        collection, external, context, qrels_file=lambda split: f"qrels/{split}.tsv", split_of=splits, metadata=True
    )
    writers["judgments.jsonl"] = jsonl_writer(judgment_records(qrels, external))
    provenance = pool_provenance(study) if study is not None else {}
    writers["provenance.jsonl"] = jsonl_writer(
        lambda: (
            {"query-id": query, "corpus-id": passage, "sources": provenance.get((query, passage), [])}
            for query, passage, _ in external
        )
    )
    run_ids = [source["run"] for sources in provenance.values() for source in sources if "run" in source]
    writers["runs.json"] = lambda file: json.dump(run_descriptions(run_ids), file, indent=2)
    writers["trec/docs.tsv"] = lines_writer(
        lambda: (
            f"{record['_id']}\t{_one_line(record['title'] + ' ' + record['text'])}"
            for record in corpus_records(collection)
        )
    )
    writers["trec/queries.tsv"] = lines_writer(
        lambda: (f"{record['_id']}\t{_one_line(record['text'])}" for record in query_records(collection, context))
    )
    writers["trec/qrels"] = lines_writer(lambda: (f"{q} 0 {p} {r}" for q, p, r in external))
    summary = {
        "collection": collection.name,
        "qrels": qrels.source,
        "qrels_label": qrels.label,
        "queries": collection.queries.count(),
        "passages": collection.passages.count(),
        "qrels_pairs": len(external),
        "relevant": sum(relevance > 0 for _, _, relevance in external),
    }
    metadata = {
        **summary,
        "created_at": timezone.now().isoformat(),
        "qrels_details": qrels.details,
        "query_context": list(context) if context else "all",
        "pool": (
            {
                "study": study.pk,
                "name": study.name,
                "parameters": _study_parameters(study),
                "strategy": pool_summary(study),
            }
            if study
            else None
        ),
        "files": sorted([*writers, "bundle.json"]),
    }
    writers["bundle.json"] = lambda file: json.dump(metadata, file, indent=2, ensure_ascii=False)
    out = write_folder(directory, writers)
    return {**summary, "out": str(out), "files": metadata["files"]}


def _study_parameters(study: Study) -> dict:
    """How the study drew its items, without the per-item sources (provenance.jsonl has them)."""
    return {key: value for key, value in (study.parameters or {}).items() if key != "sources"}


def _one_line(text: str) -> str:
    """Text for a TSV cell: tabs and line breaks become spaces."""
    return " ".join(text.replace("\t", " ").splitlines()).strip()


def bundle_archive(collection: Collection, qrels: Qrels) -> BinaryIO:
    """The bundle as a zip archive (one top folder named after the collection), in an anonymous
    temporary file positioned at its start: it disappears when closed."""
    name = slugify(collection.name) or f"collection-{collection.pk}"
    archive = tempfile.TemporaryFile()  # noqa: SIM115 -- the caller (a FileResponse) closes it
    try:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder) / name
            write_bundle(collection, qrels, root)
            with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
                for path in sorted(root.rglob("*")):
                    if path.is_file():
                        bundle.write(path, path.relative_to(folder).as_posix())
    except BaseException:
        archive.close()
        raise
    archive.seek(0)
    return archive
