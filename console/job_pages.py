"""Reads for the job page: which pages a job's work belongs to. The jobs app knows no other app,
so the console, which knows them all, says where a job leads (its run, its study, the collection
an upload filled)."""

from __future__ import annotations

from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from annotation.models import Study
from jobs.models import Job
from retrieval.models import Collection, Run


def job_links(job: Job) -> list[tuple[str, str]]:
    """(label, URL) of the pages about what `job` works on or made."""
    links = [(f"Run {run.pk}", reverse("run_page", args=[run.pk])) for run in Run.objects.filter(job=job)[:1]]
    study_id = job.parameters.get("study")
    study = Study.objects.filter(pk=study_id).first() if isinstance(study_id, int) else None
    if study is not None and job.kind == "report":
        links.append((f"Report of “{study.name}”", reverse("evaluation:study-report", args=[study.pk])))
    elif study is not None:
        anchor = "#judges" if job.kind == "judge" else ""
        links.append((f"Study “{study.name}”", reverse("study_detail", args=[study.pk]) + anchor))
    collection_name = job.result.get("collection") or job.parameters.get("collection")
    if isinstance(collection_name, str):
        for collection in Collection.objects.filter(name=collection_name)[:1]:
            links.append((f"Collection “{collection.name}”", reverse("collection_page", args=[collection.pk])))
    return links


def queued_message(what: str, job: Job, then: str = "") -> SafeString:
    """The message a form shows after queueing work: what was queued, on which queue, with a
    link to the job's page (messages keep their markup through the session)."""
    return format_html(
        '{} queued as <a href="{}">job {}</a> on the {} queue.{}',
        what,
        reverse("job-page", args=[job.pk]),
        job.pk,
        job.queue,
        f" {then}" if then else "",
    )
