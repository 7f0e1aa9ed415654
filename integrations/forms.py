"""Shapes of the staff recruiting forms; the rules are in integrations.services."""

from django import forms
from django.contrib.auth import get_user_model

from retrieval.fields import AsciiIntegerFormField

CONFIRM_BELOW_DONE = "Set it even below what someone has judged (they stop where they are)"


class InviteForm(forms.Form):
    email = forms.EmailField(required=False, help_text="Empty: a one-time link you pass on yourself.")
    only_invited_studies = forms.BooleanField(
        required=False,
        initial=True,
        label="Only this study",
        help_text="Untick to let the new account work on every open study as well.",
    )


class AnnotatorsForm(forms.Form):
    annotators = forms.ModelMultipleChoiceField(
        queryset=get_user_model().objects.filter(is_active=True, participant__isnull=True).order_by("username"),
        required=False,
        help_text="Nobody selected: every active annotator may work on the study.",
    )
    max_items_per_annotator = AsciiIntegerFormField(
        min_value=1, required=False, label="Cap per annotator", help_text="Empty: no cap."
    )
    confirm_below_done = forms.BooleanField(required=False, label=CONFIRM_BELOW_DONE)


class GrantForm(forms.Form):
    username = forms.CharField(max_length=150, help_text="An existing account; the study stays open to others.")


class ScopeForm(forms.Form):
    username = forms.CharField(max_length=150)
    only_granted = forms.BooleanField(required=False)


class CrowdLinkForm(forms.Form):
    completion_code = forms.CharField(max_length=64, required=False)
    completion_url = forms.URLField(
        required=False, assume_scheme="https", help_text="{code} is replaced; empty: Prolific's."
    )
    screened_out_code = forms.CharField(max_length=64, required=False)
    quota = AsciiIntegerFormField(
        min_value=1,
        required=False,
        help_text="Items per participant, the link's own limit (the cap above is separate); empty: no quota.",
    )
    active = forms.BooleanField(required=False, initial=True)
    confirm_below_done = forms.BooleanField(required=False, label=CONFIRM_BELOW_DONE)

    def service_arguments(self) -> dict:
        data = self.cleaned_data
        return {
            "completion_code": data["completion_code"] or None,
            "completion_url": data["completion_url"],
            "screened_out_code": data["screened_out_code"],
            "quota": data["quota"],
            "active": data["active"],
            "confirm_below_done": data["confirm_below_done"],
        }


class ScreenOutForm(forms.Form):
    participant = forms.CharField(max_length=64, help_text="Their name (Participant-N) or platform id.")
    reason = forms.CharField(max_length=300, initial="screened out")
