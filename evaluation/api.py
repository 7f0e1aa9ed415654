"""REST endpoints for study reports and qrels exports (staff only).

Every process loads the URLconf at start (system checks, workers, the web server), so this module
imports no statistics: it asks evaluation.reports, which names the modules that compute."""

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.permissions import IsAdminUser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Study
from evaluation import preference_access
from evaluation.aggregates import AGGREGATES, SOURCES
from evaluation.reports import compare_runs, relevance_qrels, requested_run_ids, resolve_model_runs, study_report_or_job
from jobs.serializers import JobSerializer
from judges.services import get_judge
from retrieval.api import PlainTextRenderer, text_download
from retrieval.errors import InputError


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
    """compare_runs over REST: `?runs=1,2,3[&metrics=nDCG@10 R@5]`, with each run's per-query
    values (a 400 names `runs` or `metrics` on bad input)."""

    permission_classes = [IsAdminUser]

    @extend_schema(
        parameters=[
            OpenApiParameter("runs", OpenApiTypes.STR, description="Comma-separated run ids (at least two)."),
            OpenApiParameter("metrics", OpenApiTypes.STR, description='e.g. "nDCG@10 R@5"; default: the usual set.'),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request):
        run_ids = [part for part in request.query_params.get("runs", "").split(",") if part.strip()]
        return Response(compare_runs(run_ids, request.query_params.get("metrics", "")))


# --- preference studies ---------------------------------------------------------------------------

SCORE_PARAMETERS = [
    OpenApiParameter("model", OpenApiTypes.STR, enum=["bradley-terry", "plackett-luce", "elo"]),
    OpenApiParameter("alpha", OpenApiTypes.FLOAT, description="choix's regularisation (default 0.01)."),
    OpenApiParameter("intervals", OpenApiTypes.INT, description="Bootstrap resamples (default 0: no intervals)."),
    OpenApiParameter("seed", OpenApiTypes.INT, description="The bootstrap's seed (default 0)."),
]


class PreferenceScoresAPI(APIView):
    """A preference study's scores per query (preference_scores' JSON): `queries` (query external
    id -> scores, ranking, intervals, wins, comparisons, both_bad), `model`, `alpha`, `intervals`."""

    permission_classes = [IsAdminUser]

    @extend_schema(parameters=SCORE_PARAMETERS, responses=OpenApiTypes.OBJECT)
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        return Response(preference_access.scores(study, **preference_access.options_from(request.query_params)))


class PreferenceQrelsAPI(APIView):
    permission_classes = [IsAdminUser]
    renderer_classes = [PlainTextRenderer, JSONRenderer]

    @extend_schema(
        parameters=SCORE_PARAMETERS[:2],
        responses={(200, "text/plain"): OpenApiResponse(OpenApiTypes.STR, description="qid 0 docid grade")},
        description="A preference study's ranking as preference qrels: per query the scored passages graded by "
        "place (best highest), 0 for a passage most answers called 'both bad'.",
    )
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        lines = preference_access.qrels_lines(study, **preference_access.options_from(request.query_params))
        return text_download((line + "\n" for line in lines), f"study-{study.pk}-preferences.qrels")


class PreferenceComparisonAPI(APIView):
    """`?runs=1,2[&p=0.95&depth=1000]`: each run's compatibility with the study's preference
    qrels and Kendall's tau against its human scores, per query and on average."""

    permission_classes = [IsAdminUser]

    @extend_schema(
        parameters=[
            OpenApiParameter("runs", OpenApiTypes.STR, description="Comma-separated run ids."),
            OpenApiParameter("p", OpenApiTypes.FLOAT, description="Compatibility's persistence (default 0.95)."),
            OpenApiParameter("depth", OpenApiTypes.INT, description="Compatibility's depth (default 1000)."),
            *SCORE_PARAMETERS[:2],
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        params = request.query_params
        options = {**preference_access.comparison_from(params), **preference_access.options_from(params)}
        options.pop("resamples", None)
        options.pop("seed", None)
        return Response(
            preference_access.compare(study, preference_access.requested_ids(params.get("runs", "")), **options)
        )


class PreferenceRunAPI(APIView):
    """POST `{name, model, alpha}`: store the study's human ranking as a run (retriever kind
    "human") -> 201 with `run_id`, `name`, `queries`, `hits`."""

    permission_classes = [IsAdminUser]

    @extend_schema(request=OpenApiTypes.OBJECT, responses={201: OpenApiTypes.OBJECT})
    def post(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        data = request.data if isinstance(request.data, dict) else {}
        name = data.get("name")
        if name is not None and not isinstance(name, str):
            raise InputError("must be text", field="name")
        options = preference_access.options_from({key: data.get(key) for key in ("model", "alpha")})
        run = preference_access.human_run(study, name or None, **options)
        body = {"run_id": run.pk, "name": run.name, "queries": run.query_results.count(), "hits": run.hits.count()}
        return Response(body, status=status.HTTP_201_CREATED)
