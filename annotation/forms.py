"""Forms of the annotation pages. They check types and ranges only; the study rules (a run of
the same collection, a book of that collection, enough usable negatives) stay in
`annotation.services`, whose InputError names the field the form shows it under."""
from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model

from retrieval.models import Collection, Document, Run

from .services.studies import MAX_CANDIDATES, MAX_CONTEXT_SENTENCES, MAX_JUDGMENTS_PER_ITEM, MIN_CANDIDATES


class RunChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, run: Run) -> str:
        return f"run {run.pk}: {run.retriever.name} on {run.collection.name}"


class BookChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, document: Document) -> str:
        return f"{document.title} ({document.collection.name})"


class AnnotatorChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, user) -> str:
        return user.get_username()


class ProxyStudyForm(forms.Form):
    """The settings of `create_proxy_study`, under the same names."""

    name = forms.CharField(max_length=200)
    collection = forms.ModelChoiceField(queryset=Collection.objects.order_by("name"))
    negatives_run = RunChoiceField(
        queryset=Run.objects.filter(status=Run.Status.DONE).select_related("retriever", "collection"),
        label="Negatives from run",
        help_text="The best-ranked usable passages of this run become the negatives.",
    )
    items = forms.IntegerField(min_value=1, initial=100, label="Number of items")
    candidates = forms.IntegerField(
        min_value=MIN_CANDIDATES, max_value=MAX_CANDIDATES, initial=3, label="Candidates per item (k)",
        help_text="The gold and k - 1 negatives.",
    )
    judgments_per_item = forms.IntegerField(min_value=1, max_value=MAX_JUDGMENTS_PER_ITEM, initial=3)
    seed = forms.IntegerField(initial=0, help_text="Same seed, same data: the same items in the same order.")
    context_left = forms.IntegerField(
        min_value=0, max_value=MAX_CONTEXT_SENTENCES, initial=4, label="Context sentences on the left"
    )
    context_right = forms.IntegerField(
        min_value=0, max_value=MAX_CONTEXT_SENTENCES, initial=4, label="Context sentences on the right"
    )
    single_sentence = forms.BooleanField(required=False, label="Single-sentence quotations only")
    book = BookChoiceField(
        queryset=Document.objects.select_related("collection").order_by("collection__name", "ordinal"),
        required=False, label="Book", help_text="Only queries about this book (optional).",
    )
    guidelines = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}), required=False)
    annotators = AnnotatorChoiceField(
        queryset=get_user_model().objects.filter(is_active=True).order_by("username"),
        required=False, widget=forms.CheckboxSelectMultiple,
        help_text="Who may work on it. None ticked: every active annotator.",
    )
    claim_minutes = forms.IntegerField(
        min_value=1, initial=30, label="Claim expires after (minutes)",
        help_text="An item left unanswered this long goes back to the queue.",
    )

    def add_service_error(self, error) -> None:
        """Show an InputError under the field it names (or above the form)."""
        self.add_error(error.field if error.field in self.fields else None, error.message)


class VoidJudgmentForm(forms.Form):
    reason = forms.CharField(max_length=2000, strip=True)


class JudgmentForm(forms.Form):
    """The annotator's answer as posted by the page: the item shown, the 0-based position of the
    candidate chosen, and the seconds the browser measured (kept as text: a broken timer must
    not cost the answer, the service drops what is not a number)."""

    item = forms.IntegerField(min_value=1)
    choice = forms.IntegerField(
        min_value=0, max_value=MAX_CANDIDATES - 1,
        error_messages={"required": "Choose one of the candidates before submitting."},
    )
    seconds = forms.CharField(required=False)
