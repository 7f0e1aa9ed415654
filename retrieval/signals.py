"""Signals the retrieval app sends so that apps above it can answer without retrieval importing
them (imports flow one way: retrieval knows only jobs).

`deletion_requested(sender=<model class>, instance=<Collection or Run>)`: sent before a collection
or a run is deleted. A receiver returns a list of reasons the deletion must be refused (empty when
it has none); annotation answers with the studies that depend on the object."""

from django.dispatch import Signal

deletion_requested = Signal()
