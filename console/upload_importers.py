"""The importers behind each upload kind (console/uploads.py names them by dotted path): each
takes the uploaded file or unpacked folder, the upload's options and the job's progress, runs the
same importer as the command line and returns its summary."""

from __future__ import annotations

from pathlib import Path

from annotation.models import Study
from annotation.services import import_judgments
from jobs.progress import Progress
from retrieval.errors import InputError
from retrieval.models import Collection
from retrieval.services.answers_import import import_answers
from retrieval.services.external_runs import imported_run_summary
from retrieval.services.importers import import_beir, import_book, import_relic
from retrieval.services.qrels_import import import_qrels
from retrieval.services.trec_files import import_trec_run


def _collection(options: dict) -> Collection:
    return Collection.objects.get(pk=options["collection"])


def _beir_root(folder: Path) -> Path:
    """The unpacked folder holding corpus.jsonl: the archive's top, or its one top-level folder."""
    if (folder / "corpus.jsonl").is_file():
        return folder
    inner = [path for path in folder.iterdir() if path.is_dir() and path.name != "__MACOSX"]
    if len(inner) == 1 and (inner[0] / "corpus.jsonl").is_file():
        return inner[0]
    raise InputError("no corpus.jsonl at the archive's top or in its one folder", file=str(folder))


def import_book_upload(path: Path, options: dict, progress: Progress) -> dict:
    return import_book(
        path,
        title=options["title"],
        author=options.get("author", ""),
        collection_name=options.get("name") or None,
        progress=progress,
    )


def import_relic_upload(path: Path, options: dict, progress: Progress) -> dict:
    return import_relic(
        path, collection_name=options.get("name") or None, split=options.get("split") or "test", progress=progress
    )


def import_beir_upload(path: Path, options: dict, progress: Progress) -> dict:
    return import_beir(_beir_root(path), collection_name=options["name"], progress=progress)


def import_qrels_upload(path: Path, options: dict, progress: Progress) -> dict:
    return import_qrels(_collection(options), path, progress=progress)


def import_judgments_upload(path: Path, options: dict, progress: Progress) -> dict:
    progress(0.0, "reading judgments")
    return import_judgments(Study.objects.get(pk=options["study"]), path).summary()


def import_trec_run_upload(path: Path, options: dict, progress: Progress) -> dict:
    run = import_trec_run(_collection(options), path, name=options.get("name") or path.stem, progress=progress)
    return imported_run_summary(run)


def import_answers_upload(path: Path, options: dict, progress: Progress) -> dict:
    source = _collection(options) if options.get("collection") else None
    return import_answers(
        path, collection_name=options.get("name") or path.stem, queries_from=source, progress=progress
    )
