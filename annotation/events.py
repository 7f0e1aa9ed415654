"""What happens in annotation, announced for apps above it (integrations' webhooks) without
annotation knowing who listens. Each is sent inside the transaction that made it happen, so a
receiver that writes rows (an outbox) commits or rolls back with it; receivers must not do slow
work there (dispatch after commit instead).

- `judgment_submitted(judgment)`: a web judgment was stored (not a repeat of a stored one).
- `item_complete(item)`: that judgment gave the item all its `judgments_per_item` judgments.
- `study_complete(study)`: ... and with it every formal item of the study is complete.
- `annotator_flagged(flag)`: a quality-control flag was raised (a new AnnotatorFlag).
"""

from django.dispatch import Signal

judgment_submitted = Signal()
item_complete = Signal()
study_complete = Signal()
annotator_flagged = Signal()
