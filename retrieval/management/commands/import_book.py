"""`import_book PATH [PATH ...] [--title T] [--author A] [--collection NAME] [--async] [--json]`:
plain-text books as sentences and 1..5-sentence windows, in one collection. One book takes its
title from --title; several books are titled by their file names and need --collection. With
--async the books are segmented on the Celery workers, a job per book (per chunk of a long one)."""

from pathlib import Path

from jobs.progress import terminal_progress
from retrieval.errors import InputError
from retrieval.management.base import JsonCommand
from retrieval.services.import_jobs import start_book_import
from retrieval.services.importers import check_text_book, import_book, import_books


class Command(JsonCommand):
    help = "Import plain-text books (Project Gutenberg boilerplate removed) as sentences and windows."

    def add_command_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="path", help="UTF-8 text file(s).")
        parser.add_argument("--title", help="The book's title (one book; required then).")
        parser.add_argument("--author", default="")
        parser.add_argument("--collection", help="Collection name (default: the title; required for several books).")
        parser.add_argument(
            "--async", dest="run_async", action="store_true", help="Segment the books on the Celery workers."
        )

    def run(self, **options):
        paths = options["paths"]
        books = self.books(paths, options)
        name = options["collection"] or books[0].title
        if options["run_async"]:
            job = start_book_import(books, collection_name=name, source=" ".join(paths))
            return {"collection": job.parameters["collection"], "job_id": job.pk, "parts": job.parameters["parts"]}
        progress = terminal_progress("import_book")
        if len(paths) == 1:
            book = books[0]
            return import_book(paths[0], title=book.title, author=book.author, collection_name=name, progress=progress)
        return import_books(books, collection_name=name, source=" ".join(paths), progress=progress)

    @staticmethod
    def books(paths: list[str], options: dict) -> list:
        if len(paths) == 1:
            if not options["title"]:
                raise InputError("a title is required", field="title")
            return [check_text_book(paths[0], options["title"], options["author"])]
        if options["title"]:
            raise InputError("--title names one book; several books are titled by their file names", field="title")
        if not options["collection"]:
            raise InputError("several books need a collection name", field="collection")
        return [check_text_book(path, title=Path(path).stem, author=options["author"]) for path in paths]
