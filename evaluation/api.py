"""REST endpoints for study reports and qrels exports (staff only).

Every process loads the URLconf at start (system checks, workers, the web server), so this module
imports no statistics: it asks evaluation.reports, which names the modules that compute."""

from django.http import FileResponse, HttpResponse
from django.shortcuts import get_object_or_404
from django.utils.text import slugify
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.permissions import IsAdminUser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Study
from evaluation.aggregates import AGGREGATES, SOURCES
from evaluation.leaderboard_exports import leaderboard_csv, leaderboard_latex
from evaluation.reports import (
    bundle_archive,
    compare_runs,
    judge_agreement,
    leaderboard,
    relevance_qrels,
    requested_run_ids,
    resolve_model_runs,
    start_judge_card,
    study_report_or_job,
)
from jobs.serializers import JobSerializer
from judges.models import Judge
from judges.selectors import judge_cards
from judges.services import get_judge
from retrieval.api import PlainTextRenderer, text_download
from retrieval.errors import InputError
from retrieval.fields import AsciiIntegerField
from retrieval.models import Collection
from retrieval.qrels_sources import load_qrels


class StudyReportAPI(APIView):
    permission_classes = [IsAdminUser]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "model_run",
                OpenApiTypes.INT,
                many=True,
                description="Run(s) on the study's collection to compare with the humans (repeat or comma-separate).",
            )
        ],
        responses={200: OpenApiTypes.OBJECT, 202: JobSerializer},
        description=(
            "A large study (MARGINALIA_REPORT_JOB_ITEMS items or more) without a fresh cached report answers 202 "
            "with the job computing it; ask again when it has finished. "
            "The report of the study's kind. Proxy: agreement, majority and annotator accuracy, model accuracy "
            "with McNemar tests, random baseline. Relevance and quotability: Krippendorff's alpha, Fleiss and "
            "pairwise Cohen kappa, span and rubric agreement, aggregated labels with ties, annotators (gold "
            "accuracy, agreement with the majority, median seconds), the quotable share with a Wilson interval, "
            "and Spearman/Kendall correlations of model scores with mean human grades."
        ),
    )
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        runs = resolve_model_runs(study, requested_run_ids(request.query_params.getlist("model_run")))
        report, job = study_report_or_job(study, runs, request.user)
        if job is not None:
            return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
        return Response(report)


class StudyQrelsAPI(APIView):
    permission_classes = [IsAdminUser]
    renderer_classes = [PlainTextRenderer, JSONRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "aggregate",
                OpenApiTypes.STR,
                enum=list(AGGREGATES),
                description="majority (ties: the lower label), or the scale value nearest the mean or median.",
            ),
            OpenApiParameter(
                "source", OpenApiTypes.STR, enum=list(SOURCES), description="Whose labels (default humans)."
            ),
            OpenApiParameter("judge", OpenApiTypes.STR, description="The judge for source=judge or both."),
        ],
        responses={
            (200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="TREC qrels: qid 0 docid relevance")
        },
        description="A relevance study's aggregated labels as TREC qrels; adjudications override the aggregate.",
    )
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        source, judge = request.query_params.get("source", "humans"), request.query_params.get("judge")
        export = relevance_qrels(
            study,
            request.query_params.get("aggregate", "majority"),
            source,
            get_judge(judge) if judge or source != "humans" else None,
        )
        return text_download((line + "\n" for line in export.lines()), f"study-{study.pk}-{export.aggregate}.qrels")


class RunComparisonAPI(APIView):
    """compare_runs over REST: `?runs=1,2,3[&metrics=nDCG@10 R@5&qrels=study:4]`, with each run's
    per-query values (a 400 names `runs`, `metrics` or `qrels` on bad input)."""

    permission_classes = [IsAdminUser]

    @extend_schema(
        parameters=[
            OpenApiParameter("runs", OpenApiTypes.STR, description="Comma-separated run ids (at least two)."),
            OpenApiParameter("metrics", OpenApiTypes.STR, description='e.g. "nDCG@10 R@5"; default: the usual set.'),
            OpenApiParameter(
                "qrels", OpenApiTypes.STR, description="imported (default), study:ID[:aggregate], judge:NAME."
            ),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request):
        run_ids = [part for part in request.query_params.get("runs", "").split(",") if part.strip()]
        params = request.query_params
        return Response(compare_runs(run_ids, params.get("metrics", ""), params.get("qrels") or None))


LEADERBOARD_EXPORTS = {
    "csv": (leaderboard_csv, "text/csv", "csv"),
    "latex": (leaderboard_latex, "application/x-tex", "tex"),
}


def leaderboard_options(params) -> dict:
    """The leaderboard's options from query parameters (the API's and the page's)."""
    return {
        "run_ids": requested_run_ids(params.getlist("runs")),
        "qrels": params.get("qrels") or None,
        "metrics": params.get("metrics", ""),
        "leave_one_out": params.get("leave_one_out") or None,
        "threshold": params.get("coverage_threshold") or None,
        "per_query": params.get("per_query") in ("1", "true", "yes"),
    }


def leaderboard_download(collection: Collection, board: dict, export: str) -> HttpResponse:
    """The leaderboard as a CSV or LaTeX file to save."""
    render, content_type, suffix = LEADERBOARD_EXPORTS[export]
    response = HttpResponse(render(board), content_type=f"{content_type}; charset=utf-8")
    name = slugify(collection.name) or f"collection-{collection.pk}"
    response["Content-Disposition"] = f'attachment; filename="leaderboard-{name}.{suffix}"'
    return response


class LeaderboardAPI(APIView):
    """`leaderboard` over REST: `?runs=1,2,3[&qrels=study:4&metrics=nDCG@10 P@5&leave_one_out=10
    &coverage_threshold=0.8&export=json|csv|latex]` (bad input: 400 naming the field)."""

    permission_classes = [IsAdminUser]

    @extend_schema(
        parameters=[
            OpenApiParameter("runs", OpenApiTypes.STR, description="Comma-separated run ids (at least two)."),
            OpenApiParameter(
                "qrels", OpenApiTypes.STR, description="imported (default), study:ID[:aggregate], judge:NAME."
            ),
            OpenApiParameter(
                "metrics", OpenApiTypes.STR, description='ir-measures or trec_eval names, e.g. "nDCG@10 P@5 Bpref".'
            ),
            OpenApiParameter("leave_one_out", OpenApiTypes.INT, description="Pool depth for leave-one-run-out."),
            OpenApiParameter("coverage_threshold", OpenApiTypes.NUMBER, description="Warn below this Judged@k."),
            OpenApiParameter("per_query", OpenApiTypes.BOOL, description="Add every run's per-query values."),
            OpenApiParameter(
                "export", OpenApiTypes.STR, enum=["json", *LEADERBOARD_EXPORTS], description="Default json."
            ),
        ],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="One row per run."),
            (200, "application/x-tex"): OpenApiResponse(OpenApiTypes.STR, description="A booktabs table."),
        },
    )
    def get(self, request, collection_id):
        collection = get_object_or_404(Collection, pk=collection_id)
        export = request.query_params.get("export", "json")
        if export != "json" and export not in LEADERBOARD_EXPORTS:
            raise InputError(f"unknown export {export!r}: use json, csv or latex", field="export")
        board = leaderboard(collection, **leaderboard_options(request.query_params))
        return Response(board) if export == "json" else leaderboard_download(collection, board, export)


def agreement_options(params) -> dict:
    """judge_agreement's options from query parameters (the API's and the page's)."""
    return {
        "run_ids": requested_run_ids(params.getlist("runs")),
        "human": params.get("human") or None,
        "metrics": params.get("metrics", ""),
        "seed": params.get("seed") or None,
        "bootstrap": params.get("bootstrap") or None,
    }


class JudgeAgreementAPI(APIView):
    """`judge_agreement` over REST: `?runs=1,2,3&judge=NAME[&human=imported|study:ID&metrics=nDCG@10
    P@5&seed=0&bootstrap=1000]` (bad input: 400 naming the field)."""

    permission_classes = [IsAdminUser]

    @extend_schema(
        parameters=[
            OpenApiParameter("runs", OpenApiTypes.STR, description="Comma-separated run ids (at least two)."),
            OpenApiParameter("judge", OpenApiTypes.STR, description="The judge's name (its latest version's labels)."),
            OpenApiParameter("human", OpenApiTypes.STR, description="imported (default) or study:ID[:aggregate]."),
            OpenApiParameter("metrics", OpenApiTypes.STR, description='e.g. "nDCG@10 P@5".'),
            OpenApiParameter("seed", OpenApiTypes.INT, description="Seed of the bootstrap over queries (0)."),
            OpenApiParameter("bootstrap", OpenApiTypes.INT, description="Bootstrap resamples (1000; 0: none)."),
        ],
        responses=OpenApiTypes.OBJECT,
        description="Kendall's tau-b, tau_AP (the judge's ranking against the human one) and Spearman's rho between "
        "the runs' leaderboards under the human qrels and the judge's labels, with bootstrap intervals over queries, "
        "the largest rank change and Cohen's kappa of the labels per query.",
    )
    def get(self, request, collection_id):
        collection = get_object_or_404(Collection, pk=collection_id)
        options = agreement_options(request.query_params)
        return Response(
            judge_agreement(collection, options.pop("run_ids"), judge=request.query_params.get("judge", ""), **options)
        )


class JudgeCardRequestSerializer(serializers.Serializer):
    """POST /api/judges/ID/cards/: which collection and humans, the runs for leaderboard
    agreement, the proxy study to probe the position bias with, samples per pair."""

    collection = AsciiIntegerField(min_value=1)
    human = serializers.CharField(required=False, allow_blank=True, default="")
    runs = serializers.CharField(required=False, allow_blank=True, default="", help_text="Comma-separated run ids.")
    metrics = serializers.CharField(required=False, allow_blank=True, default="")
    probe_study = AsciiIntegerField(required=False, allow_null=True, default=None, min_value=1)
    samples = AsciiIntegerField(required=False, default=1, min_value=1, max_value=20)
    seed = AsciiIntegerField(required=False, default=0, min_value=0, max_value=2**32 - 1)
    bootstrap = AsciiIntegerField(required=False, default=1000, min_value=0, max_value=100_000)


class JudgeCardsAPI(APIView):
    """GET the cards of every version of this judge (its name), newest first, to compare
    versions and prompts; POST {collection, human, runs, metrics, probe_study, samples, seed,
    bootstrap} queues the card's computation for this judge version (202 with the job; it asks
    the judge what it has not answered)."""

    permission_classes = [IsAdminUser]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, pk):
        judge = get_object_or_404(Judge, pk=pk)
        return Response({"judge": judge.name, "cards": judge_cards(judge.name)})

    @extend_schema(request=JudgeCardRequestSerializer, responses={202: OpenApiTypes.OBJECT})
    def post(self, request, pk):
        judge = get_object_or_404(Judge, pk=pk)
        form = JudgeCardRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        collection = Collection.objects.filter(pk=data["collection"]).first()
        if collection is None:
            raise InputError(f"no collection with id {data['collection']}", field="collection")
        job = start_judge_card(
            judge,
            collection,
            request.user,
            human=data["human"] or None,
            run_ids=requested_run_ids([data["runs"]]),
            metrics=data["metrics"],
            probe_study=data["probe_study"],
            samples=data["samples"],
            seed=data["seed"],
            bootstrap=data["bootstrap"],
        )
        return Response({"job": JobSerializer(job).data}, status=status.HTTP_202_ACCEPTED)


class CollectionBundleAPI(APIView):
    """The collection as a bundle a peer can load (evaluation/bundles.py), as a zip:
    `?qrels=imported|study:ID|judge:NAME` chooses whose labels become its qrels."""

    permission_classes = [IsAdminUser]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "qrels", OpenApiTypes.STR, description="imported (default), study:ID[:aggregate], judge:NAME."
            )
        ],
        responses={(200, "application/zip"): OpenApiResponse(OpenApiTypes.BINARY, description="The bundle.")},
    )
    def get(self, request, collection_id):
        collection = get_object_or_404(Collection, pk=collection_id)
        qrels = load_qrels(collection, request.query_params.get("qrels") or None)
        name = slugify(collection.name) or f"collection-{collection.pk}"
        return FileResponse(
            bundle_archive(collection, qrels),
            as_attachment=True,
            filename=f"{name}-{slugify(qrels.source)}.zip",
            content_type="application/zip",
        )
