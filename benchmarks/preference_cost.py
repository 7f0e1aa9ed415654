#!/usr/bin/env python
"""What the adaptive top-k preference procedure costs against asking all pairs, on BIRCO's RELiC
dev pools (about 50 passages a query), through the platform's own path.

For each k (1, 5, 10) an adaptive preference study (rule top-k, Clarke, Vtyurina and Smucker's
procedure with p = max(7, 2k-1), f = p + 2) is created over the first --queries queries' own
pools, and a simulated annotator with known preferences answers every pair the queue serves, as
the web and the API do (claim_next_item, submit_judgment): each passage has a true utility (2 x
its qrel relevance plus a seeded normal draw), and the annotator prefers the higher one (with
--noise s, with Bradley-Terry probability from utilities divided by s). Printed per k: pairs
asked per query (mean, min, max), all pairs of the same pools, their ratio, and in how many
queries the procedure's top k is the true top k; then the informative-pair rule given the top-k
procedure's mean pairs per query as its budget, for comparison (its top k: the Bradley-Terry
ranking's, evaluation.preference_scores).

Usage, from the project root (a few minutes: every answer goes through the submit service):
    .venv/bin/python benchmarks/preference_cost.py [--data ../shared/data] [--queries 10] [--noise 0]
"""

import argparse
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from paper_scale import setup_django  # noqa: E402


def simulated_answer(item, utility: dict[int, float], noise: float, rng: random.Random) -> int:
    """The display position the simulated annotator prefers."""
    candidates = list(item.candidates.order_by("position"))
    first, second = (utility[candidate.passage_id] for candidate in candidates)
    if noise == 0:
        return 0 if first > second else 1
    return 0 if rng.random() < 1 / (1 + math.exp((second - first) / noise)) else 1


def judge_all(study, annotator, utility, noise: float, rng: random.Random) -> int:
    from annotation.services import claim_next_item, submit_judgment

    answered = 0
    while (assignment := claim_next_item(study, annotator)) is not None:
        position = simulated_answer(assignment.item, utility, noise, rng)
        submit_judgment(annotator=annotator, item=assignment.item, position=position)
        answered += 1
    return answered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--noise", type=float, default=0.0, help="0: a consistent annotator")
    parser.add_argument("--ks", default="1,5,10")
    args = parser.parse_args()

    # Counts, not speed, are measured: the scratch SQLite file need not reach the disk at every commit.
    os.environ.setdefault("MARGINALIA_SQLITE_SYNCHRONOUS", "OFF")
    with tempfile.TemporaryDirectory() as scratch:
        setup_django(None, Path(scratch))
        from django.core.management import call_command

        call_command("migrate", "--no-input", verbosity=0)
        from annotation.models import PreferenceQuery
        from annotation.services import create_preference_study
        from annotation.services.preference_designs import TopK
        from evaluation.preference_scores import preference_scores
        from retrieval.models import Collection, Qrel
        from retrieval.services.importers import import_beir
        from tests.factories import make_annotator

        import_beir(args.data / "birco-relic-dev", collection_name="birco-relic-dev")
        collection = Collection.objects.get(name="birco-relic-dev")
        rng = random.Random(0)
        relevance = dict(Qrel.objects.filter(query__collection=collection).values_list("passage_id", "relevance"))
        utility = {
            pk: 2.0 * relevance.get(pk, 0) + rng.gauss(0, 1) for pk in collection.passages.values_list("pk", flat=True)
        }
        queries = list(collection.queries.order_by("ordinal").values_list("external_id", flat=True)[: args.queries])
        print(f"BIRCO RELiC dev, {len(queries)} queries, their own pools; annotator noise {args.noise}")
        columns = (
            "  k",
            "  p",
            "  f",
            "pairs/query (min-max)",
            "all pairs",
            " ratio",
            "true top k",
            "informative rule",
        )
        print("  ".join(columns))
        for k in [int(part) for part in args.ks.split(",")]:
            started = time.perf_counter()
            procedure = TopK.with_defaults(k)
            study = create_preference_study(
                name=f"top-{k}", collection=collection, use_pools=True, queries=queries, design="adaptive", top_k=k
            ).study
            judge_all(study, make_annotator(f"sim-top-{k}"), utility, args.noise, random.Random(k))
            asked, full, exact = [], [], 0
            for state in PreferenceQuery.objects.filter(study=study):
                asked.append(state.pairs)
                full.append(math.comb(len(state.pool), 2))
                truth = sorted(state.pool, key=lambda pk: -utility[pk])[:k]
                exact += [passage for passage, _ in state.found[:k]] == truth
            budget = round(statistics.mean(asked))
            informative = create_preference_study(
                name=f"informative-{k}",
                collection=collection,
                use_pools=True,
                queries=queries,
                design="adaptive",
                rule="informative",
                budget=budget,
                batch=1,
            ).study
            judge_all(informative, make_annotator(f"sim-informative-{k}"), utility, args.noise, random.Random(k))
            ranked = preference_scores(informative, resamples=0)["queries"]
            external = dict(collection.passages.values_list("pk", "external_id"))
            informative_exact = 0
            for state in PreferenceQuery.objects.filter(study=informative).select_related("query"):
                truth = [external[pk] for pk in sorted(state.pool, key=lambda pk: -utility[pk])[:k]]
                informative_exact += ranked[state.query.external_id]["ranking"][:k] == truth
            mean = statistics.mean(asked)
            print(
                f"{k:>3} {procedure.pairings:>3} {procedure.all_pairs_below:>3}  "
                f"{mean:>8.1f} ({min(asked):>4}-{max(asked):>4})  {statistics.mean(full):>9.1f}  "
                f"{mean / statistics.mean(full):>6.3f}  {exact:>6}/{len(asked):<3}  "
                f"{budget:>5} pairs: {informative_exact:>3}/{len(asked):<3} exact   "
                f"({time.perf_counter() - started:.0f} s)"
            )


if __name__ == "__main__":
    main()
