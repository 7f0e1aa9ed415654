"""Shapes of the staff recruiting forms; the rules are in integrations.services."""

from django import forms
from django.contrib.auth import get_user_model


class InviteForm(forms.Form):
    email = forms.EmailField(required=False, help_text="Empty: a one-time link you pass on yourself.")


class AnnotatorsForm(forms.Form):
    annotators = forms.ModelMultipleChoiceField(
        queryset=get_user_model().objects.filter(is_active=True, participant__isnull=True).order_by("username"),
        required=False,
        help_text="Nobody selected: every active annotator may work on the study.",
    )
    max_items_per_annotator = forms.IntegerField(min_value=1, required=False, help_text="Empty: no cap.")


class CrowdLinkForm(forms.Form):
    completion_code = forms.CharField(max_length=64, required=False)
    completion_url = forms.URLField(
        required=False, assume_scheme="https", help_text="{code} is replaced; empty: Prolific's."
    )
    screened_out_code = forms.CharField(max_length=64, required=False)
    quota = forms.IntegerField(min_value=1, required=False, help_text="Items per participant; empty: no quota.")
    active = forms.BooleanField(required=False, initial=True)

    def service_arguments(self) -> dict:
        data = self.cleaned_data
        return {
            "completion_code": data["completion_code"] or None,
            "completion_url": data["completion_url"],
            "screened_out_code": data["screened_out_code"],
            "quota": data["quota"],
            "active": data["active"],
        }


class ScreenOutForm(forms.Form):
    participant = forms.CharField(max_length=64)
    reason = forms.CharField(max_length=300, initial="screened out")
