"""Uploads from the dashboard and `/api/uploads/`: a file of one of the registered kinds is
checked at once (kind, size, name ending, the options it needs, an archive's listing), kept in
its own folder under MARGINALIA_DATA_DIR/uploads/ and imported by a worker job ("upload", on the
cpu queue) through the same importer as the command line, with progress. The folder is removed
when the job ends, whatever the outcome; an importer writes in one transaction, so a failed
upload leaves nothing behind. Errors are one line naming the file as uploaded (inside an archive:
`beir.zip/corpus.jsonl:3: field '_id': ...`).

The kinds are a registry: a new kind is one `register(UploadKind(...))` call naming its importer
by dotted path (console/upload_importers.py): a function of (the file or unpacked folder, the
options, progress) returning the importer's summary. The path is resolved in the worker, so the
web process that lists and checks uploads never loads the importers (spaCy, torch) at start-up.
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from celery import signature
from django.conf import settings
from django.db import transaction
from django.utils.module_loading import import_string
from django.utils.text import get_valid_filename

from annotation.models import Study
from jobs.models import Job
from jobs.progress import Progress
from jobs.services import create_job, dispatch, execute
from retrieval.errors import InputError
from retrieval.input_rules import character_problem, parse_id
from retrieval.models import Collection

from . import archives

JOB_KIND = "upload"
# The task that runs `run_upload` (console/tasks.py), named so that this module need not import it.
PROCESS_UPLOAD_TASK = "console.tasks.process_upload"
# The options an upload may carry, with what the forms call them.
OPTION_LABELS = {
    "name": "Collection name",
    "title": "Book title",
    "author": "Author",
    "split": "Split",
    "collection": "Collection",
    "study": "Study",
}


@dataclass(frozen=True)
class UploadKind:
    name: str
    label: str
    suffixes: tuple[str, ...]  # accepted file name endings, lower case
    importer: str  # dotted path of `importer(path, options, progress) -> summary`
    options: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    help: str = ""

    @property
    def archive(self) -> bool:
        return all(archives.is_archive(f"x{suffix}") for suffix in self.suffixes)


UPLOAD_KINDS: dict[str, UploadKind] = {}


def register(kind: UploadKind) -> UploadKind:
    UPLOAD_KINDS[kind.name] = kind
    return kind


register(
    UploadKind(
        "book",
        "Book (.txt)",
        (".txt",),
        importer="console.upload_importers.import_book_upload",
        options=("title", "author", "name"),
        required=("title",),
        help="Plain UTF-8 text; Gutenberg headers are stripped. A new collection (default name: the title).",
    )
)
register(
    UploadKind(
        "relic",
        "RELiC JSON",
        (".json",),
        importer="console.upload_importers.import_relic_upload",
        options=("name", "split"),
        help="Books with their quotes and candidate windows; a new collection (default name: the file's).",
    )
)
register(
    UploadKind(
        "beir",
        "BEIR folder (.zip / .tar.gz)",
        archives.ARCHIVE_SUFFIXES,
        importer="console.upload_importers.import_beir_upload",
        options=("name",),
        help="corpus.jsonl, queries.jsonl, qrels.tsv (or qrels/test.tsv), optional pools.jsonl; a new collection.",
    )
)
register(
    UploadKind(
        "qrels",
        "Qrels",
        (".txt", ".tsv", ".qrels"),
        importer="console.upload_importers.import_qrels_upload",
        options=("collection",),
        required=("collection",),
        help="TREC 'qid 0 docid relevance' lines or BEIR's qrels.tsv, into a collection without runs.",
    )
)
register(
    UploadKind(
        "judgments",
        "Judgments (JSONL)",
        (".jsonl",),
        importer="console.upload_importers.import_judgments_upload",
        options=("study",),
        required=("study",),
        help="One answer per line, as import_judgments reads them, into a study.",
    )
)
register(
    UploadKind(
        "trec_run",
        "TREC run",
        (".txt", ".trec", ".run"),
        importer="console.upload_importers.import_trec_run_upload",
        options=("collection", "name"),
        required=("collection",),
        help="qid Q0 docid rank score tag lines from any system: a named run of a collection (default: the file name).",
    )
)
register(
    UploadKind(
        "answers",
        "Generated answers (JSONL)",
        (".jsonl",),
        importer="console.upload_importers.import_answers_upload",
        options=("name", "collection"),
        help="One answer per line {query, system, text}: into an answers collection (default name: the file's), "
        "one run per system; queries copied from the collection chosen, or the rows' query_text.",
    )
)


def _suffix_ok(kind: UploadKind, filename: str) -> bool:
    return filename.lower().endswith(kind.suffixes)


def _archive_stem(filename: str) -> str:
    lower = filename.lower()
    for suffix in archives.ARCHIVE_SUFFIXES:
        if lower.endswith(suffix):
            return filename[: -len(suffix)]
    return Path(filename).stem


def _clean_options(kind: UploadKind, options: dict) -> dict:
    """The kind's options as the input rule takes them: text without NUL or lone surrogates,
    required ones present, ids written in ASCII digits and naming an existing row."""
    cleaned = {name: str(options.get(name) or "").strip() for name in kind.options}
    for name, value in cleaned.items():
        if problem := character_problem(value):
            raise InputError(problem[1], field=name)
    for name in kind.required:
        if not cleaned[name]:
            raise InputError(f"{OPTION_LABELS[name].lower()} is required for a {kind.label} upload", field=name)
    for name, model in (("collection", Collection), ("study", Study)):
        if cleaned.get(name):
            row_id = parse_id(cleaned[name])
            if row_id is None or not model.objects.filter(pk=row_id).exists():
                raise InputError(f"no {name} with id {cleaned[name]!r}", field=name)
            cleaned[name] = row_id
    return {name: value for name, value in cleaned.items() if value != ""}


def upload_folder() -> Path:
    return Path(settings.MARGINALIA_DATA_DIR) / "uploads"


def queue_upload(kind_name: str, uploaded, options: dict, user=None) -> Job:
    """Check the upload, keep it and queue its import; raises InputError (naming the field:
    kind, file or an option) with nothing kept when the upload is refused."""
    kind = UPLOAD_KINDS.get(kind_name or "")
    if kind is None:
        raise InputError(f"unknown upload kind {kind_name!r}; use one of: {', '.join(UPLOAD_KINDS)}", field="kind")
    if uploaded is None:
        raise InputError("choose a file to upload", field="file")
    if problem := character_problem(uploaded.name):
        raise InputError(f"the file's name {problem[1]}", field="file")
    filename = get_valid_filename(Path(uploaded.name).name) or "upload"
    limit = settings.MARGINALIA_UPLOAD_MAX_BYTES
    if uploaded.size > limit:
        raise InputError(
            f"{uploaded.name} is {uploaded.size} bytes; uploads are limited to {limit} bytes"
            " (MARGINALIA_UPLOAD_MAX_BYTES)",
            field="file",
        )
    if not _suffix_ok(kind, filename):
        raise InputError(f"{uploaded.name}: a {kind.label} upload ends in {' or '.join(kind.suffixes)}", field="file")
    cleaned = _clean_options(kind, options)
    if kind.name == "beir":
        cleaned.setdefault("name", _archive_stem(uploaded.name))
    folder = upload_folder() / uuid.uuid4().hex
    folder.mkdir(parents=True)
    try:
        path = folder / filename
        with path.open("wb") as sink:
            for chunk in uploaded.chunks():
                sink.write(chunk)
        if kind.archive:
            archives.check(path, label=uploaded.name)
        with transaction.atomic():
            parameters = {"upload": kind.name, "file": uploaded.name, "options": cleaned, "folder": folder.name}
            job = create_job(JOB_KIND, "cpu", parameters, user=user)
            return dispatch(job, signature(PROCESS_UPLOAD_TASK))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def run_upload(job_id: int) -> dict:
    """The worker's part: unpack an archive, run the kind's importer with the job's progress,
    then remove the upload's folder (success, failure or cancellation alike)."""
    job = Job.objects.get(pk=job_id)
    parameters = job.parameters
    kind = UPLOAD_KINDS[parameters["upload"]]
    folder = upload_folder() / parameters["folder"]
    label = parameters["file"]

    def work(progress: Progress) -> dict:
        path = folder / get_valid_filename(Path(label).name)
        if kind.archive:
            progress(0.0, "unpacking")
            path = archives.extract(path, folder / "unpacked", label=label)
        try:
            summary = import_string(kind.importer)(path, parameters["options"], progress)
        except InputError as error:
            error.file = _as_uploaded(error.file, folder, label)
            raise
        return {"upload": kind.name, "file": label, **summary}

    try:
        return execute(job_id, work)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _as_uploaded(file: str | None, folder: Path, label: str) -> str:
    """An importer's file name as the uploader knows it: the upload's own name, or the path
    inside the archive after it."""
    if not file:
        return label
    try:
        relative = Path(file).relative_to(folder)
    except ValueError:
        return file
    parts = relative.parts
    if parts and parts[0] == "unpacked":
        return "/".join((label, *parts[1:])) if len(parts) > 1 else label
    return label
