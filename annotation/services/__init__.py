"""The annotation app's rules, one import away for views, the API, commands and tasks:

- `create_proxy_study(...)` -> StudyCreation (studies.py)
- `claim_next_item(study, annotator)` -> Assignment | None, `next_work(study, annotator)` -> the
  annotator-facing payload, `submit_judgment(...)` -> Submission, `void_judgment(...)` (queue.py)
- `import_judgments(study, path)` -> ImportResult (imports.py)

Refusals are exceptions: AnnotationForbidden (403), SubmissionRejected (400/409) and
retrieval.errors.InputError for bad settings or files (naming the field, line and file).
"""
from .imports import ImportResult, import_judgments
from .queue import (
    AnnotationForbidden,
    Submission,
    SubmissionRejected,
    annotator_refusal,
    claim_next_item,
    clamp_seconds,
    expire_stale_claims,
    next_work,
    submit_judgment,
    void_judgment,
)
from .studies import SkippedQuery, StudyCreation, create_proxy_study

__all__ = [
    "AnnotationForbidden", "ImportResult", "SkippedQuery", "StudyCreation", "Submission", "SubmissionRejected",
    "annotator_refusal", "claim_next_item", "clamp_seconds", "create_proxy_study", "expire_stale_claims",
    "import_judgments", "next_work", "submit_judgment", "void_judgment",
]
