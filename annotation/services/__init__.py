"""The annotation app's rules, one import away for views, the API, commands and tasks:

- `create_proxy_study(...)` -> StudyCreation, `get_study(study_id)` (studies.py)
- `claim_next_item(study, annotator)` -> Assignment | None, `next_work(study, annotator)` -> the
  annotator-facing payload, `submit_judgment(...)` -> Submission, `void_judgment(...)` (queue.py)
- `create_relevance_study(...)`, `create_quotability_study(...)` -> StudyCreation, `qrel_label(item)`
  (label_studies.py)
- `create_preference_study(...)` -> StudyCreation (preference_studies.py; designs in
  preference_designs.py, adaptive scheduling in preference_scheduling.py)
- `validate_answer(study, item, ...)` -> Answer, `is_correct(item, answer)`, `validate_schema(...)`,
  `default_schema(kind)` (labels.py)
- `import_judgments(study, path)` -> ImportResult (imports.py)
- pools of relevance studies: `extend_pool(study, runs, budget=...)` -> PoolExtension; the queue's
  `draw_for_claim` and the item_complete receiver's `record_completion` feed move-to-front
  (pools.py; the strategies are annotation/pooling.py; import them from there)
- qualification rounds: `qualification_state(study, annotator)`, `next_question`, `record_answer`
  (qualification.py; next_work and submit_judgment route to them by item role)
- quality control: `designate_items`, `designate_gold_share`, `gold_accuracy`, `speeds`,
  `refresh_flags`, `resolve_flag`, `block_annotator`, `unblock_annotator`, `sample_for_peer_review`,
  `next_peer_review`, `submit_peer_review`, `peer_pass_rates`, `disagreement_items`, `adjudicate`,
  `quality_overview` (quality.py; import them from there)

Refusals are exceptions: AnnotationForbidden (403), SubmissionRejected (400/409) and
retrieval.errors.InputError for bad settings or files (naming the field, line and file).
"""

from .imports import ImportResult, import_judgments
from .label_studies import create_quotability_study, create_relevance_study, qrel_label
from .labels import Answer, default_schema, is_correct, validate_answer, validate_expected, validate_schema
from .preference_studies import create_preference_study
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
from .studies import SkippedQuery, StudyCreation, create_proxy_study, get_study

__all__ = [
    "AnnotationForbidden",
    "Answer",
    "ImportResult",
    "SkippedQuery",
    "StudyCreation",
    "Submission",
    "SubmissionRejected",
    "annotator_refusal",
    "claim_next_item",
    "clamp_seconds",
    "create_preference_study",
    "create_proxy_study",
    "create_quotability_study",
    "create_relevance_study",
    "default_schema",
    "expire_stale_claims",
    "get_study",
    "import_judgments",
    "is_correct",
    "next_work",
    "qrel_label",
    "submit_judgment",
    "validate_answer",
    "validate_expected",
    "validate_schema",
    "void_judgment",
]
