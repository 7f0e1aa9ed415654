"""Rerankers that apps above retrieval provide (a judge, in judges/): each registers itself when
its app starts, so `retrieve --retriever NAME --run RUN_ID` can offer it without retrieval
importing the app (imports flow one way). The work is named by dotted path and loads when a
rerank runs: apps register at start-up, and what a reranker computes with (a judge's backends)
is not for every process to load."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.utils.module_loading import import_string

from jobs.progress import Progress


@dataclass(frozen=True)
class Reranker:
    name: str
    help: str
    # Adds the reranker's own options to retrieve's parser (e.g. --judge).
    add_arguments: Callable
    # Dotted path of (the run to rerank, depth or None for the reranker's default, all options,
    # progress) -> summary.
    rerank: str


RERANKERS: dict[str, Reranker] = {}


def register_reranker(reranker: Reranker) -> None:
    RERANKERS[reranker.name] = reranker


def rerank_with(name: str, run, depth: int | None, options: dict, progress: Progress) -> dict:
    return import_string(RERANKERS[name].rerank)(run, depth, options, progress)
