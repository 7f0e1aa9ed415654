"""How a relevance study's labels of one (query, passage) pair become one qrel: named here, apart
from evaluation.qrels, so the API can list them without loading the statistics."""

AGGREGATES = ("majority", "mean", "median")
