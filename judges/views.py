"""The staff pages of judges: the judges page (registered judges, a form per backend to register
one, the judge secrets), a judge version's page (its settings, every version, the form that
saves a new version), and the form behind templates/judges/_study_judges.html that starts
judging a study (post/redirect/get; the panel then follows the job's progress).

Registering or editing an endpoint judge and every judge-secret action need
judges.manage_judge_endpoints (the services check it); staff without it see the endpoint form
disabled, with the reason."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Count, Max
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from annotation.models import Study
from retrieval.access import staff_required
from retrieval.errors import InputError

from .forms import FORMS, JudgeSecretChangeForm, JudgeSecretForm
from .models import Judge, JudgeSecret
from .secrets import ENDPOINT_PERMISSION, can_manage_endpoints, change_secret, delete_secret, store_secret
from .selectors import judge_secret_row
from .services import get_judge, latest_version, register_judge, revise_judge, start_judging

NEEDS_PERMISSION = (
    f"Registering or changing a judge that calls an endpoint, and managing judge secrets, needs the permission "
    f"{ENDPOINT_PERMISSION} (an administrator grants it on the admin's user page)."
)


def _page(request, template: str, context: dict, status: int = 200):
    may = can_manage_endpoints(request.user)
    return render(
        request,
        template,
        {**context, "can_manage_endpoints": may, "needs_permission": "" if may else NEEDS_PERMISSION},
        status=status,
    )


def _saved(request, judge: Judge, before: int) -> None:
    if judge.version > before:
        messages.success(request, f"Judge {judge.name} saved as version {judge.version}.")
    else:
        messages.info(request, f"Judge {judge.name} already has these settings: version {judge.version} stays.")


def _judge_list(request, forms: dict | None = None, secret_form: JudgeSecretForm | None = None, status: int = 200):
    """The judges page, each form showing what was sent and its errors, else empty."""
    judges = (
        Judge.objects.values("name")
        .annotate(versions=Count("id"), latest=Max("version"), changed=Max("created_at"))
        .order_by("name")
    )
    latest = {judge.name: judge for judge in Judge.objects.order_by("name", "version")}
    may = can_manage_endpoints(request.user)
    return _page(
        request,
        "judges/judge_list.html",
        {
            "judges": [{**row, "judge": latest[row["name"]]} for row in judges],
            "forms": {backend: form_class() for backend, form_class in FORMS.items()} | (forms or {}),
            "secrets": [judge_secret_row(secret) for secret in JudgeSecret.objects.all()] if may else [],
            "secret_form": secret_form or JudgeSecretForm(),
        },
        status,
    )


@staff_required
@require_http_methods(["GET", "POST"])
def judge_list(request):
    """GET: the judges and a form per backend. POST: register the judge of the form sent."""
    if request.method == "GET":
        return _judge_list(request)
    backend = request.POST.get("backend", "")
    if backend not in FORMS:
        messages.error(request, "Choose one of the forms below: a run, a local model or an endpoint.")
        return redirect("judges:judge-list")
    form = FORMS[backend](request.POST)
    if form.is_valid():
        name = form.cleaned_data["name"].strip()
        before = latest_version(name)
        try:
            judge = register_judge(name, backend, form.settings(), request.user)
        except InputError as error:
            form.add_service_error(error)
        else:
            _saved(request, judge, before)
            return redirect("judges:judge-page", pk=judge.pk)
    return _judge_list(request, forms={backend: form}, status=400)


@staff_required
@require_http_methods(["GET", "POST"])
def judge_page(request, pk: int):
    """GET: one version's settings, every version of its name, the form for a new version, and
    the cards of every version (templates/judges/_judge_cards.html). POST: save the form as a new
    version (the service decides whether anything changed). Ensembles and imported labels have
    no form: they change by register_judge or import_judge_labels."""
    judge = get_object_or_404(Judge.objects.select_related("created_by"), pk=pk)
    form_class = FORMS.get(judge.backend)
    form = form_class(judge=judge) if form_class else None
    status = 200
    if request.method == "POST" and form_class is None:
        messages.error(request, f"A {judge.get_backend_display()} judge changes from the command line, not here.")
        return redirect("judges:judge-page", pk=judge.pk)
    if request.method == "POST":
        form = form_class(request.POST, judge=judge)
        if form.is_valid():
            before = latest_version(judge.name)
            try:
                saved = revise_judge(judge, form.settings(), request.user)
            except InputError as error:
                form.add_service_error(error)
            else:
                _saved(request, saved, before)
                return redirect("judges:judge-page", pk=saved.pk)
        status = 400
    versions = (
        Judge.objects.filter(name=judge.name)
        .select_related("created_by")
        .annotate(answer_count=Count("answers"))
        .order_by("-version")
    )
    return _page(request, "judges/judge_page.html", {"judge": judge, "form": form, "versions": versions}, status)


@staff_required
@require_POST
def secret_add(request):
    form = JudgeSecretForm(request.POST)
    if form.is_valid():
        try:
            secret = store_secret(form.cleaned_data["name"], form.cleaned_data["value"], request.user)
        except InputError as error:
            form.add_service_error(error)
        else:
            messages.success(request, f"Judge secret {secret.name} registered ({secret.hint}).")
            return redirect(reverse("judges:judge-list") + "#secrets")
    return _judge_list(request, secret_form=form, status=400)


@staff_required
@require_POST
def secret_change(request, pk: int):
    secret = get_object_or_404(JudgeSecret, pk=pk)
    form = JudgeSecretChangeForm(request.POST)
    try:
        if not form.is_valid():
            raise InputError("type the new key", field="value")
        change_secret(secret, form.cleaned_data["value"], request.user)
    except InputError as error:
        messages.error(request, f"Judge secret {secret.name} was not changed: {error.message}.")
    else:
        messages.success(request, f"Judge secret {secret.name} changed ({secret.hint}); its judges use it now.")
    return redirect(reverse("judges:judge-list") + "#secrets")


@staff_required
@require_POST
def secret_delete(request, pk: int):
    secret = get_object_or_404(JudgeSecret, pk=pk)
    delete_secret(secret, request.user)
    messages.success(request, f"Judge secret {secret.name} deleted; judges naming it are refused until it returns.")
    return redirect(reverse("judges:judge-list") + "#secrets")


@staff_required
@require_POST
def study_judge(request, study_id: int):
    study = get_object_or_404(Study, pk=study_id)
    try:
        samples = int(request.POST.get("samples") or 1)
        judge = get_judge(request.POST.get("judge") or None)
        job = start_judging(study, judge, samples, request.user)
    except ValueError:
        messages.error(request, "Samples must be a whole number.")
    except InputError as exc:
        messages.error(request, exc.for_people())
    else:
        messages.success(
            request,
            format_html(
                'Judging of “{}” by {} queued as <a href="{}">job {}</a> on the {} queue.',
                study.name,
                judge,
                reverse("job-page", args=[job.pk]),
                job.pk,
                job.queue,
            ),
        )
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = reverse("study_detail", args=[study.pk])
    return redirect(back)
