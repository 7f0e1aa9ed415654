"""What evaluation finds, announced for apps above it (integrations' webhooks) without evaluation
knowing who listens. Sent inside the transaction that records the finding, so a receiver that
writes rows (an outbox) commits or rolls back with it.

- `agreement_low(study, scope, annotator, measure, value, threshold, evidence, checked_at)`: a
  study's agreement (scope "study": Krippendorff's alpha over `evidence` units) or an annotator's
  (scope "annotator": Cohen's kappa with the others over `evidence` pairs) fell below the
  threshold staff set (evaluation.models.AgreementWatch). Sent when it falls, not again while it
  stays below.
"""

from django.dispatch import Signal

agreement_low = Signal()
