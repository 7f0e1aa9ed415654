"""How a relevance study's labels of one (query, passage) pair become one qrel: named here, apart
from evaluation.qrels, so the API can list them without loading the statistics."""

# Label aggregation by annotator competence (evaluation.label_models): majority vote, or a model
# that weighs each annotator by estimated competence.
COMPETENCE_MODELS = ("dawid-skene", "mace", "glad")
LABEL_METHODS = ("majority", *COMPETENCE_MODELS)
# A qrel per (query, passage): the majority, the scale value nearest the mean or median, or a
# competence model's label.
AGGREGATES = ("majority", "mean", "median", *COMPETENCE_MODELS)
# Whose labels a qrels export aggregates: the annotators', a judge's, or both (the judge as one more rater).
SOURCES = ("humans", "judge", "both")
