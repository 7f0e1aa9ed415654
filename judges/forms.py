"""The staff forms that register and edit judges, one per backend, so that nobody writes a
judge's settings as raw JSON. Each form's fields are the settings its backend takes (the rules
and the defaults stay judges.services'); a refusal from the service shows under the field it
names (`settings.base_url` under Base URL)."""

from __future__ import annotations

from django import forms

from retrieval.fields import AsciiFloatFormField, AsciiIntegerFormField
from retrieval.models import Run

from .models import Judge, JudgeSecret
from .services import BACKEND_SETTINGS, COMMON_SETTINGS, EMBEDDED_JUDGE

SAMPLING_HELP = "0 answers greedily (the same answer every time); above 0 samples, seeded per sample."


class RunChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, run: Run) -> str:
        return f"Run {run.pk}: {run.retriever.name} on {run.collection.name}"


class JudgeForm(forms.Form):
    """What every backend's form has: the judge's name (new judges only) and the service's way
    of reading the answer. Subclasses list their settings in SETTINGS, in the service's names."""

    backend: str = ""
    SETTINGS: tuple[str, ...] = ()

    name = forms.CharField(
        max_length=100, help_text="A judge keeps its name; each change of settings makes a new version of it."
    )

    def __init__(self, *args, judge: Judge | None = None, **kwargs):
        """A form for a new judge, or (with `judge`) for a new version of that judge, starting
        from its settings."""
        initial = {**COMMON_SETTINGS, **BACKEND_SETTINGS[self.backend], **(judge.settings if judge else {})}
        super().__init__(*args, initial=initial, prefix=self.backend, **kwargs)
        self.judge = judge
        if judge is not None:
            del self.fields["name"]

    def settings(self) -> dict:
        """The settings as the service takes them (empty text stays empty: "no model folder")."""
        return {name: self.cleaned_data[name] for name in self.SETTINGS}

    def add_service_error(self, error) -> None:
        """An InputError from the service under the field it names, else above the form."""
        field = (error.field or "").removeprefix("settings.")
        self.add_error(field if field in self.fields else None, error.message)


def _temperature():
    return AsciiFloatFormField(min_value=0, help_text=SAMPLING_HELP)


def _seed():
    return AsciiIntegerFormField(min_value=0, help_text="Sample i of an item uses seed + i.")


def _max_tokens():
    return AsciiIntegerFormField(min_value=1, label="Max tokens", help_text="The longest answer generated.")


class RunJudgeForm(JudgeForm):
    """A run's scores as a judge's answers (a proxy item's highest-scoring candidate, a label
    item's score)."""

    backend = Judge.Backend.RUN
    SETTINGS = ("run",)

    run = RunChoiceField(
        queryset=Run.objects.none(), help_text="A finished run on the study's collection: its scores are the answers."
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["run"].queryset = (
            Run.objects.filter(status=Run.Status.DONE).select_related("retriever", "collection").order_by("-pk")
        )

    def settings(self) -> dict:
        return {"run": self.cleaned_data["run"].pk}


class LocalJudgeForm(JudgeForm):
    """A causal language model the worker of the gpu queue loads from disk."""

    backend = Judge.Backend.LOCAL
    SETTINGS = ("model", "gguf_file", "temperature", "seed", "max_tokens", "batch_size")

    model = forms.CharField(
        required=False,
        max_length=1000,
        label="Model folder",
        help_text=f"A transformers model folder on the workers; empty: the embedded SmolLM2 ({EMBEDDED_JUDGE}).",
    )
    gguf_file = forms.CharField(
        required=False, max_length=300, label="GGUF file", help_text="A .gguf file inside that folder, if it is one."
    )
    temperature = _temperature()
    seed = _seed()
    max_tokens = _max_tokens()
    batch_size = AsciiIntegerFormField(
        min_value=1, label="Batch size", help_text="Answers stored together (progress still moves answer by answer)."
    )


class OpenAIJudgeForm(JudgeForm):
    """Any OpenAI-compatible chat endpoint; its key is a judge secret, named, never typed here."""

    backend = Judge.Backend.OPENAI
    SETTINGS = (
        "base_url",
        "model",
        "api_key_secret",
        "temperature",
        "seed",
        "max_tokens",
        "concurrency",
        "retries",
        "timeout",
    )

    base_url = forms.CharField(
        max_length=2000,
        label="Base URL",
        help_text="The endpoint's address up to /v1; it must be public or listed in MARGINALIA_OUTBOUND_ALLOW.",
    )
    model = forms.CharField(max_length=300, help_text="The model name the endpoint expects.")
    api_key_secret = forms.ChoiceField(
        required=False,
        label="API key",
        help_text="A judge secret (registered below by name); none for endpoints that need no key.",
    )
    temperature = _temperature()
    seed = _seed()
    max_tokens = _max_tokens()
    concurrency = AsciiIntegerFormField(min_value=1, help_text="Requests in flight at once.")
    retries = AsciiIntegerFormField(
        min_value=0, help_text="Tries again after a 429, a 5xx or a lost connection (backing off)."
    )
    timeout = AsciiFloatFormField(min_value=0.1, label="Timeout (seconds)", help_text="How long one request may take.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        names = JudgeSecret.objects.order_by("name").values_list("name", flat=True)
        self.fields["api_key_secret"].choices = [("", "no key"), *((name, name) for name in names)]


FORMS = {form.backend: form for form in (RunJudgeForm, LocalJudgeForm, OpenAIJudgeForm)}


class JudgeSecretForm(forms.Form):
    """A new judge secret: a name and the key, which is never shown again."""

    name = forms.CharField(max_length=64, help_text="Letters, digits, '.', '_' or '-'; judges name it.")
    value = forms.CharField(
        widget=forms.PasswordInput(render_value=False),
        strip=False,
        label="Key",
        help_text="Stored sealed, never shown again.",
    )

    def add_service_error(self, error) -> None:
        self.add_error(error.field if error.field in self.fields else None, error.message)


class JudgeSecretChangeForm(forms.Form):
    value = forms.CharField(widget=forms.PasswordInput(render_value=False), strip=False, label="New key")
