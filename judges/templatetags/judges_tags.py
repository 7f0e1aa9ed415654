"""`{% load judges_tags %}{% study_judges study %}`: the judges panel of a staff study page (start
judging, the judges at work with their per-answer progress, the results so far), self-contained
so any staff page can include it."""

from django import template

from judges.models import Judge
from judges.selectors import judging_jobs, study_judge_results
from judges.services import EMBEDDED_JUDGE

register = template.Library()


@register.inclusion_tag("judges/_study_judges.html", takes_context=True)
def study_judges(context, study):
    names = sorted(set(Judge.objects.values_list("name", flat=True)) | {EMBEDDED_JUDGE})
    return {
        "study": study,
        "judge_names": names,
        "embedded_judge": EMBEDDED_JUDGE,
        "results": study_judge_results(study),
        "working": judging_jobs(study),
        "csrf_token": context.get("csrf_token"),
        "next": context["request"].get_full_path() if context.get("request") else "",
    }
