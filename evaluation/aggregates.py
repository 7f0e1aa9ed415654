"""Choices evaluation's computations take, named here apart from the modules that compute (they
load scipy), so pages and the API can list them without loading the statistics: how a relevance
study's labels of one (query, passage) pair become one qrel, and the leaderboard's default
measures."""

# Label aggregation by annotator competence (evaluation.label_models): majority vote, or a model
# that weighs each annotator by estimated competence.
COMPETENCE_MODELS = ("dawid-skene", "mace", "glad")
LABEL_METHODS = ("majority", *COMPETENCE_MODELS)
# A qrel per (query, passage): the majority, the scale value nearest the mean or median, or a
# competence model's label.
AGGREGATES = ("majority", "mean", "median", *COMPETENCE_MODELS)
# Whose labels a qrels export aggregates: the annotators', a judge's, or both (the judge as one more rater).
SOURCES = ("humans", "judge", "both")
# The measures a leaderboard ranks by when none are named (ir-measures names).
LEADERBOARD_METRICS = ("nDCG@10", "P@5", "AP", "Bpref")
