"""The form of the "revise an answer" page: the answer's parts as the annotation page posts them
(annotation.forms.JudgmentForm), except spans, which this page marks without a mouse: the spans
kept (a checkbox per span of the current answer, `keep_span` = "start:end") and new ones typed or
pasted as the exact words to mark (`new_spans`, one excerpt per line), each found in the text the
spans count in. An excerpt must occur exactly once there; otherwise the form says so and asks
for more words. Whether the answer fits the study stays the service's call (validate_answer)."""

from __future__ import annotations

import re

from django import forms

from retrieval.fields import AsciiIntegerFormField

from .forms import JudgmentForm
from .label_schema import study_schema
from .models import Item, Study
from .selectors import span_target_text
from .services.revisions import revision_payload
from .ui_selectors import annotation_page

MAX_NEW_SPANS = 50
_KEPT_SPAN = re.compile(r"(\d{1,9}):(\d{1,9})")


class RevisionForm(JudgmentForm):
    """A revised answer, posted by the revision page."""

    item = AsciiIntegerFormField(required=False)  # the page's URL names the item
    keep_span = forms.MultipleChoiceField(required=False)  # choices: the current answer's spans
    new_spans = forms.CharField(required=False, strip=False, max_length=20_000, widget=forms.Textarea)

    def __init__(self, data, *, study: Study, item: Item, current_spans: list[dict]):
        super().__init__(data, proxy=study.kind == Study.Kind.PROXY)
        self.study, self.item = study, item
        kept = [f"{span['start']}:{span['end']}" for span in current_spans]
        self.fields["keep_span"].choices = [(value, value) for value in kept]

    def clean_new_spans(self) -> list[str]:
        lines = [line.strip() for line in self.cleaned_data["new_spans"].replace("\r\n", "\n").split("\n")]
        excerpts = [line for line in lines if line]
        if len(excerpts) > MAX_NEW_SPANS:
            raise forms.ValidationError(f"Mark at most {MAX_NEW_SPANS} new excerpts at once.")
        return excerpts

    def clean(self):
        data = super().clean()
        if not self.proxy and "keep_span" in data and "new_spans" in data:
            data["revised_spans"] = self._spans(study_schema(self.study)["spans"])
        return data

    def _spans(self, target: str | None) -> list[dict] | None:
        """The spans of the revised answer in {target, start, end} form (None when the study marks
        none): those kept, then each new excerpt where it occurs; a ValidationError names an
        excerpt that is missing or ambiguous."""
        if target is None:
            return None
        kept = []
        for value in self.cleaned_data["keep_span"]:
            start, end = (int(part) for part in _KEPT_SPAN.fullmatch(value).groups())
            kept.append({"target": target, "start": start, "end": end})
        text = span_target_text(self.study, self.item, target)
        for excerpt in self.cleaned_data["new_spans"]:
            count = text.count(excerpt)
            if count != 1:
                where = "does not occur" if count == 0 else f"occurs {count} times"
                more = "" if count == 0 else ", with a few more around them to tell which"
                raise forms.ValidationError(f"“{excerpt}” {where} in the text; copy the exact words{more}.")
            start = text.index(excerpt)
            kept.append({"target": target, "start": start, "end": start + len(excerpt)})
        return kept

    def answer(self) -> dict:
        """The answer's parts under revise_judgment's argument names."""
        parts = super().answer()
        if not self.proxy:
            parts["spans"] = self.cleaned_data.get("revised_spans")
        return parts


def revision_page(study: Study, judgment) -> dict:
    """The revision page's content: the item laid out as the annotation page lays it out
    (ui_selectors.annotation_page over revision_payload: the item as shown, nothing else), and
    the current answer marked in it: the chosen candidate or label, selections, each rubric
    field's value, the rationale, and each span with the words it marks."""
    payload = revision_payload(study, judgment)
    page = annotation_page({"finished": False, **payload}, study)
    answer = payload["answer"]
    task = page.get("task")
    if task:
        for field in task["rubric"]:
            field["current"] = answer["rubric"].get(field["name"])
    target = study_schema(study)["spans"] if study.kind != Study.Kind.PROXY else None
    text = span_target_text(study, judgment.item, target) if target else ""
    spans = [
        {**span, "value": f"{span['start']}:{span['end']}", "text": text[span["start"] : span["end"]]}
        for span in answer["spans"]
    ]
    return {**page, "current": {**answer, "spans": spans}, "span_target": target}
