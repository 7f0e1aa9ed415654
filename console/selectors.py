"""Reads for the staff pages that join apps: a run's page (its report as table rows, the recall
curve's points, one row per query with the gold's rank) and the parts of a study's page that the
annotation app's staff selectors do not give (item text, answers with rationales and marked
excerpts, per-annotator progress). Staff only: these show gold, provenance and who answered."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db.models import Count, Max, Q

from annotation.label_schema import study_schema
from annotation.models import AnnotatorFlag, Assignment, Item, Judgment, Pool, Study
from annotation.selectors import item_limit, median_seconds_by_annotator, preview, query_display_text, span_target_text
from annotation.services.preference_scheduling import adaptive_progress, design_of, is_adaptive
from annotation.ui_selectors import staff_study_items
from evaluation.leaderboard_exports import best_means, ranked_run_ids, run_letters, significance_marks
from retrieval.metrics import METRICS, RECALL_CUTOFFS, run_metrics, run_page_coverage
from retrieval.models import Run, RunQuery
from retrieval.wording import counted

QUERIES_PER_PAGE = 100
ITEMS_PER_PAGE = 50


# --- runs ----------------------------------------------------------------------------------------


def metric_rows(summary: dict) -> list[dict]:
    """One row per metric of an evaluate_run summary: name, mean, standard error and whether
    the figure read ranks past the stored hits (`beyond_depth`)."""
    beyond = set(summary.get("beyond_depth", ()))
    return [
        {
            "name": name,
            "value": summary["metrics"].get(name),
            "stderr": summary["stderr"].get(name),
            "beyond_depth": name in beyond,
        }
        for name in METRICS
        if name in summary["metrics"]
    ]


def recall_points(summary: dict) -> list[dict]:
    """recall@k at each cutoff with its standard error: the points of the run page's plot."""
    return [
        {"k": k, "value": summary["metrics"][f"recall@{k}"], "stderr": summary["stderr"].get(f"recall@{k}")}
        for k in RECALL_CUTOFFS
        if summary["metrics"].get(f"recall@{k}") is not None
    ]


def query_preview(query) -> str:
    """A query in one short line: its text, or the context around its masked quotation."""
    around = [*query.left_context[-1:], "[…]", *query.right_context[:1]]
    text = " ".join(around) if query.has_context else query.text
    return preview(text)


def run_query_page(run: Run, page_number):
    """One page of the run's per-query results in collection order, with their queries."""
    results = RunQuery.objects.filter(run=run).select_related("query").order_by("query__ordinal", "query_id")
    return Paginator(results, QUERIES_PER_PAGE).get_page(page_number)


def run_query_rows(page, judged: dict | None = None) -> list[dict]:
    """A run_query_page's rows: preview, quote length, candidate-set size, relevant passages,
    the rank of the best-ranked one (None: no relevant passage) and, from `judged`
    (judged_per_query), its Judged@10 (None: a query the qrels do not judge)."""
    return [
        {
            "query": result.query,
            "preview": query_preview(result.query),
            "candidates": result.candidates,
            "relevant": len(result.relevant_ranks),
            "gold_rank": min(result.relevant_ranks.values(), default=None),
            "judged": (judged or {}).get(result.query.external_id, {}).get("10"),
        }
        for result in page
    ]


def by_length_table(by_quote_length: dict) -> dict:
    """evaluate_run's `by_quote_length` turned for the page: one column per quote length (with
    its number of queries), one row per metric with each length's mean and standard error."""
    lengths = [{"length": length, "queries": summary["queries"]} for length, summary in by_quote_length.items()]
    rows = [
        {"name": name, "cells": [metric_rows(summary)[index] for summary in by_quote_length.values()]}
        for index, name in enumerate(METRICS)
    ]
    return {"lengths": lengths, "by_length": rows if lengths else []}


def coverage_rows(coverage: dict) -> list[dict]:
    """run_coverage's figures as table rows: depth, mean Judged@k, standard error, queries below."""
    figures = coverage["coverage"]
    return [
        {"depth": key, "value": value, "stderr": figures["stderr"][key], "below": figures["queries_below"][key]}
        for key, value in coverage["judged"].items()
    ]


def run_page(run: Run, page_number=1, qrels: str | None = None, threshold=None) -> dict:
    """Everything the run page shows; its coverage under `qrels` (default the collection's own)
    with a warning below `threshold` (InputError on a bad source or threshold)."""
    report = run_metrics(run)
    page = run_query_page(run, page_number)
    coverage = run_page_coverage(run, [result.query for result in page], qrels, threshold) if report else None
    rows = run_query_rows(page, coverage["judged_per_query"] if coverage else None)
    return {
        "coverage": coverage,
        "coverage_rows": coverage_rows(coverage) if coverage else [],
        "report": report,
        "metrics": metric_rows(report) if report else [],
        "recall": recall_points(report) if report else [],
        **by_length_table((report or {}).get("by_quote_length", {})),
        "query_rows": rows,
        "query_page": page,
    }


# --- leaderboards --------------------------------------------------------------------------------


def leaderboard_rows(board: dict) -> dict:
    """A leaderboard turned for its page: one row per run, best first by the first measure,
    each measure's cell with its mean, standard error, Judged@k, significance letters, whether
    it is the column's best, and its leave-one-out value and rank change; the paired tests with
    the runs' names; Kendall's tau per measure."""
    letters, marks = run_letters(board), significance_marks(board)
    loo = board.get("leave_one_out", {})
    best = best_means(board)
    rows = []
    for place, run_id in enumerate(ranked_run_ids(board), 1):
        entry = board["runs"][run_id]
        cells = [
            {
                "name": name,
                "value": entry["metrics"][name],
                "stderr": entry["stderr"][name],
                "judged_at": board["judged_at"][name],
                "judged": entry["judged"][board["judged_at"][name]],
                "marks": "".join(marks[name][run_id]),
                "best": entry["metrics"][name] == best[name],
                "loo": loo[run_id]["metrics"][name] if loo else None,
                "rank_change": loo[run_id]["rank_change"][name] if loo else None,
            }
            for name in board["metrics"]
        ]
        rows.append(
            {
                "place": place,
                "run_id": run_id,
                "letter": letters[run_id],
                "name": entry["name"],
                "cells": cells,
                "warning": entry["coverage_warning"],
                "removed_pairs": loo[run_id]["removed_pairs"] if loo else None,
            }
        )
    names = {run_id: entry["name"] for run_id, entry in board["runs"].items()}
    tests = [
        {
            **test,
            "a_name": names[test["a"]],
            "b_name": names[test["b"]],
            "significant": test["holm_pvalue"] < board["significance"],
        }
        for test in board["tests"]
    ]
    taus = [(name, board["kendall_tau"][name]) for name in board["metrics"]] if "kendall_tau" in board else []
    columns = [{"name": name, "judged_at": board["judged_at"][name]} for name in board["metrics"]]
    return {"columns": columns, "rows": rows, "tests": tests, "taus": taus}


def agreement_rows(report: dict) -> dict:
    """One judge's leaderboard agreement turned for its page: per metric the coefficients and
    one row per run in the human ranking's order (its value and place under each qrels); the
    label agreement's per-query rows."""
    metrics = []
    for name, section in report["metrics"].items():
        judge_place = {run_id: place for place, run_id in enumerate(section["judge_ranking"], 1)}
        rows = [
            {
                "run_id": run_id,
                "name": report["runs"][run_id],
                "human": section["human"][run_id],
                "judge": section["judge"][run_id],
                "human_place": place,
                "judge_place": judge_place[run_id],
                "change": judge_place[run_id] - place,
            }
            for place, run_id in enumerate(section["human_ranking"], 1)
        ]
        metrics.append({"name": name, **section, "rows": rows})
    per_query = [{"query": query, **entry} for query, entry in report["labels"]["per_query"].items()]
    return {"report": report, "metrics": metrics, "per_query": per_query}


# --- studies -------------------------------------------------------------------------------------


HYGIENE_WORDS = (
    ("overlaps_gold", "near-copy of the gold", "near-copies of the gold"),
    ("duplicates_negative", "near-copy of another negative", "near-copies of other negatives"),
    ("repeats_context", "repeat of the shown context", "repeats of the shown context"),
    ("other_relevant", "other relevant passage", "other relevant passages"),
)


def candidate_hygiene_words(tally: dict | None) -> str | None:
    """The creation's candidate_hygiene tally as a sentence ("2 negatives replaced in 1 item: 1
    near-copy of the gold, ..."); None for a study created before the tally was kept."""
    if tally is None:
        return None
    replaced, items = tally["negatives_replaced"], tally["items_affected"]
    if not replaced:
        return "no negative needed replacing"
    reasons = [f"{tally[key]} {one if tally[key] == 1 else many}" for key, one, many in HYGIENE_WORDS if tally.get(key)]
    replaced_where = f"{counted(replaced, 'negative')} replaced in {counted(items, 'item')}"
    return f"{replaced_where} by the next of the run: {', '.join(reasons)}"


def study_facts(study: Study) -> dict:
    """What a label study asks (question, scale with its names, spans, rationale) and where its
    items came from (source runs, depth, pools); a preference study's schema, design and, when
    adaptive, each query's progress; for a proxy study, the negatives its creation replaced."""
    if study.kind == Study.Kind.PROXY:
        return {"hygiene": candidate_hygiene_words(study.parameters.get("candidate_hygiene"))}
    schema = study_schema(study)
    pooled = Pool.objects.filter(study=study).values_list("runs", flat=True).first()  # runs added later too
    run_ids = pooled if pooled is not None else study.parameters.get("runs") or []
    runs = Run.objects.filter(pk__in=run_ids).select_related("retriever")
    if study.kind == Study.Kind.PREFERENCE:
        return {
            **schema,
            "design": design_of(study),
            "adaptive": adaptive_progress(study) if is_adaptive(study) else [],
            "source_runs": list(runs),
            "depth": study.parameters.get("depth"),
            "use_pools": study.parameters.get("use_pools"),
        }
    return {
        "question": schema["question"],
        "scale": schema["scale"],
        "values": [{"value": value, "label": schema["value_labels"].get(str(value), "")} for value in schema["values"]],
        "multi_select": schema["multi_select"],
        "spans": schema["spans"],
        "rationale": schema["rationale"],
        "source_runs": list(runs),
        "depth": study.parameters.get("depth"),
        "use_pools": study.parameters.get("use_pools"),
    }


def study_item_rows(study: Study, page_number) -> tuple[list[dict], object]:
    """One page of the study's items in order: staff_study_items with what the annotators read
    (the item's text as shown to them) and, for each answer, its rationale and the excerpts its
    spans marked; and the page, for the pager."""
    texts: dict[tuple[int, str], str] = {}

    def target_text(item: Item, target: str) -> str:
        if (item.pk, target) not in texts:
            texts[item.pk, target] = span_target_text(study, item, target)
        return texts[item.pk, target]

    items = Item.objects.filter(study=study).select_related("query").order_by("position")
    page = Paginator(items, ITEMS_PER_PAGE).get_page(page_number)
    rows = staff_study_items(study, list(page))
    for row in rows:
        item = row["item"]
        row["text"] = query_display_text(item.query, study.context_left, study.context_right)
        for entry in row["judgments"]:
            entry["excerpts"] = [
                target_text(item, span["target"])[span["start"] : span["end"]] for span in entry["judgment"].spans
            ]
    return rows, page


def annotator_rows(study: Study) -> list[dict]:
    """Per annotator who was allowed, claimed or answered: counted judgments done, items still
    open to them (formal items they have not answered that still need answers, and no more than
    their item limit leaves them: the study's cap or their own quota, as on their progress bar,
    where a voided judgment still counts), median seconds (exact, of the client's seconds on live
    judgments), open quality flags and when they last submitted or claimed. Counted in the
    database, one aggregate per figure, the median included: the page stays quick at 100K items."""
    formal = Item.objects.filter(study=study).exclude(role=Item.Role.QUALIFICATION)
    open_items = formal.filter(live_judgments__lt=study.judgments_per_item)  # stored: live_counts.py
    open_count = open_items.count()
    judgments = Judgment.objects.filter(study=study)  # the item's study, copied: no join
    judged_open = (  # a finished study has no open item: spare the pass over its judgments
        _per_annotator(judgments.filter(item__in=open_items.values("pk")), Count("item", distinct=True))
        if open_count
        else {}
    )
    # Judgments done (counted), worked (voided too: they count against an item limit) and timed
    # (live, with the client's seconds: what the median is taken over), in one pass over an index of
    # the study's judgments that holds every column read (Judgment.Meta); then each one's last
    # judgment, a seek in that index (a MAX in the pass compared 300K timestamps: a third of it).
    formal_judgment = ~Q(item_role=Item.Role.QUALIFICATION)
    per_annotator = (
        judgments.order_by()
        .values_list("annotator")
        .annotate(
            done=Count("pk", filter=Q(voided=False) & formal_judgment),
            worked=Count("pk", filter=formal_judgment),
            timed=Count("pk", filter=Q(voided=False, seconds__isnull=False)),
        )
        .values_list("annotator", "done", "worked", "timed")
    )
    done, worked, timed = {}, {}, {}
    for annotator, done_count, worked_count, timed_count in per_annotator:
        done[annotator], worked[annotator], timed[annotator] = done_count, worked_count, timed_count
    last_judged = {
        annotator: judgments.filter(annotator_id=annotator).aggregate(last=Max("submitted_at"))["last"]
        for annotator in done
    }
    quotas = dict(study.grants.filter(item_quota__isnull=False).values_list("annotator", "item_quota"))
    last_claimed = _per_annotator(Assignment.objects.filter(item__study=study), Max("claimed_at"))
    flags = _per_annotator(AnnotatorFlag.objects.filter(study=study, resolved_at__isnull=True), Count("pk"))
    medians = median_seconds_by_annotator(judgments.filter(voided=False), "seconds", timed)
    ids = set(last_judged) | set(last_claimed) | set(study.annotators.values_list("pk", flat=True))
    people = get_user_model().objects.filter(pk__in=ids).order_by("username")
    return [
        {
            "annotator": person,
            "done": done.get(person.pk, 0),
            "remaining": _left_to_judge(
                open_count - judged_open.get(person.pk, 0),
                item_limit(study.max_items_per_annotator, quotas.get(person.pk)),
                worked.get(person.pk, 0),
            ),
            "median_seconds": medians[person.pk].value if person.pk in medians else None,
            "flags": flags.get(person.pk, 0),
            "last_active": max(
                (when for when in (last_judged.get(person.pk), last_claimed.get(person.pk)) if when), default=None
            ),
        }
        for person in people
    ]


def _left_to_judge(open_to_them: int, limit: int | None, worked: int) -> int:
    """Open items an annotator may still judge: their item limit stops them before the study
    runs out (a lab annotator at the cap, a participant who finished the quota has none left)."""
    if limit is None:
        return open_to_them
    return max(0, min(open_to_them, limit - worked))


def _per_annotator(rows, aggregate) -> dict:
    """annotator id -> `aggregate` over `rows` (a queryset with an `annotator` field)."""
    return dict(rows.order_by().values_list("annotator").annotate(value=aggregate).values_list("annotator", "value"))
