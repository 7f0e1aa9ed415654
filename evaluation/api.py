"""REST endpoints for study reports and qrels exports (staff only).

Every process loads the URLconf at start (system checks, workers, the web server), so this module
imports no statistics: it asks evaluation.reports, which names the modules that compute."""

import itertools

from django.http import FileResponse, HttpResponse, StreamingHttpResponse
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
from evaluation import alerts, preference_access
from evaluation.aggregates import AGGREGATES, LABEL_METHODS, SOURCES
from evaluation.bulk import collection_paused, json_lines
from evaluation.leaderboard_exports import leaderboard_csv, leaderboard_latex
from evaluation.reports import (
    bundle_archive,
    compare_runs,
    judge_agreement,
    leaderboard,
    relevance_qrels,
    requested_run_ids,
    requested_seed,
    resolve_model_runs,
    soft_label_rows,
    start_judge_card,
    study_aggregation,
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
            "with McNemar tests, random baseline, whether each model (run or judge) is indistinguishable from chance. "
            "Relevance and quotability: Krippendorff's alpha, Fleiss and "
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
                description="majority (ties: the lower label), the scale value nearest the mean or median, or a "
                "model of annotator competence (dawid-skene, mace, glad; source humans or both).",
            ),
            OpenApiParameter(
                "source", OpenApiTypes.STR, enum=list(SOURCES), description="Whose labels (default humans)."
            ),
            OpenApiParameter("judge", OpenApiTypes.STR, description="The judge for source=judge or both."),
            OpenApiParameter(
                "provenance",
                OpenApiTypes.BOOL,
                description="1: JSON lines, each qrel with label_source (adjudicated, unanimous, single, aggregated), "
                "label_method and labels, instead of TREC lines.",
            ),
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
        provenance = request.query_params.get("provenance") in ("1", "true")
        name = f"study-{study.pk}-{export.aggregate}" + (".provenance.jsonl" if provenance else ".qrels")
        return text_download((line + "\n" for line in export.lines(provenance)), name)


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
    agreement, the proxy study to probe the position bias with, samples per pair, and
    optionally a stratified sample of the pool (`sample` pairs, `sample_seed`)."""

    collection = AsciiIntegerField(min_value=1)
    human = serializers.CharField(required=False, allow_blank=True, default="")
    runs = serializers.CharField(required=False, allow_blank=True, default="", help_text="Comma-separated run ids.")
    metrics = serializers.CharField(required=False, allow_blank=True, default="")
    probe_study = AsciiIntegerField(required=False, allow_null=True, default=None, min_value=1)
    samples = AsciiIntegerField(required=False, default=1, min_value=1, max_value=20)
    seed = AsciiIntegerField(required=False, default=0, min_value=0, max_value=2**32 - 1)
    bootstrap = AsciiIntegerField(required=False, default=1000, min_value=0, max_value=100_000)
    sample = AsciiIntegerField(required=False, allow_null=True, default=None, min_value=1, max_value=10**7)
    sample_seed = AsciiIntegerField(required=False, default=0, min_value=0, max_value=2**32 - 1)


class JudgeCardsAPI(APIView):
    """GET the cards of every version of this judge (its name), newest first, to compare
    versions and prompts; POST {collection, human, runs, metrics, probe_study, samples, seed,
    bootstrap, sample, sample_seed} queues the card's computation for this judge version (202 with the job; it asks
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
            sample=data["sample"],
            sample_seed=data["sample_seed"],
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


METHOD_PARAMETERS = [
    OpenApiParameter(
        "method",
        OpenApiTypes.STR,
        enum=list(LABEL_METHODS),
        description="majority (ties: the lowest label) or a model of annotator competence; default majority.",
    ),
    OpenApiParameter("seed", OpenApiTypes.INT, description="MACE's random start; default the study's seed."),
]


class StudyAggregateAPI(APIView):
    """aggregate_labels over REST: one label per item, the annotators' competence and each item's
    posterior (see DESIGN.md's contract). Staff only: competences and answers are staff data."""

    permission_classes = [IsAdminUser]

    @extend_schema(parameters=METHOD_PARAMETERS, responses=OpenApiTypes.OBJECT)
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        seed = requested_seed(request.query_params.get("seed"))
        return Response(study_aggregation(study, request.query_params.get("method", "majority"), seed))

    @collection_paused()
    def dispatch(self, request, *args, **kwargs):
        """The payload rendered here, still without cyclic garbage collection (evaluation.bulk):
        the JSON encoder makes a list of pairs per dict it writes, and at 100K items the walks
        those set off over the payload took as long as the encoding."""
        response = super().dispatch(request, *args, **kwargs)
        return response.render() if isinstance(response, Response) else response


class StudySoftLabelsAPI(APIView):
    """The soft-label export: one JSON line per aggregated item with its whole posterior
    (`aggregate_labels --soft`), streamed."""

    permission_classes = [IsAdminUser]

    @extend_schema(
        parameters=METHOD_PARAMETERS,
        responses={(200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR, description="JSON lines")},
    )
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        seed = requested_seed(request.query_params.get("seed"))
        rows = soft_label_rows(study, request.query_params.get("method", "majority"), seed)
        first = next(rows, None)  # fit now, so a refusal is a 400 and not a broken stream
        response = StreamingHttpResponse(
            json_lines(itertools.chain([first] if first else [], rows)),
            content_type="application/x-ndjson; charset=utf-8",
        )
        method = request.query_params.get("method", "majority")
        response["Content-Disposition"] = f'attachment; filename="study-{study.pk}-{method}-soft-labels.jsonl"'
        return response


class StudyAgreementAPI(APIView):
    """The report's agreement per annotator, per label and over time (`agreement_detail`), from
    the cached report; a large study without one answers 202 with the job computing it."""

    permission_classes = [IsAdminUser]

    @extend_schema(responses={200: OpenApiTypes.OBJECT, 202: JobSerializer})
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        report, job = study_report_or_job(study, (), request.user)
        if job is not None:
            return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
        return Response({"study": study.pk, **report["agreement_detail"]})


class AgreementWatchAPI(APIView):
    """The study's agreement thresholds and batch size (PUT any of `study_threshold`,
    `annotator_threshold`: a number in [-1, 1] or null; `batch_size`: judgments), with what the
    last check found. A 400 names the field."""

    permission_classes = [IsAdminUser]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        return Response(alerts.watch_payload(alerts.watch_of(study)))

    @extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)
    def put(self, request, study_id):
        study = get_object_or_404(Study, pk=study_id)
        if not isinstance(request.data, dict):
            raise InputError("send an object of settings", field="body")
        fields = {str(key): request.data[key] for key in request.data}  # a form's last value per key
        return Response(alerts.watch_payload(alerts.set_watch(study, **fields)))


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
