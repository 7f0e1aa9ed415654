"""How a relevance study's labels of one (query, passage) pair become one qrel: named here, apart
from evaluation.qrels, so the API can list them without loading the statistics."""

AGGREGATES = ("majority", "mean", "median")
# Whose labels a qrels export aggregates: the annotators', a judge's, or both (the judge as one more rater).
SOURCES = ("humans", "judge", "both")
