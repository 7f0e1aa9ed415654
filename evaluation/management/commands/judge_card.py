"""`judge_card NAME --collection C [--human imported|study:ID] [--runs A,B,C] [--metrics "nDCG@10"]
[--probe-study ID] [--samples N] [--seed S] [--bootstrap N] [--sample N [--sample-seed S]]
[--objective-file F] [--async] [--json]`: compute and keep the card of the judge's latest version
on a collection (evaluation.judge_card: item agreement, leaderboard agreement, position / length /
calibration probes, self-consistency, unparseable answers), asking the judge what it has not
answered; `--sample N` asks it a seeded sample of N pairs stratified by human grade per query
(`pool.sample` says so), for a judge too slow for the whole pool. Keys
`card`, `judge`, `version`, `prompt` and the card's figures (`items`, `leaderboard`, `position`,
`length`, `calibration`, `self_consistency`, `unparseable`, `pool`). `--compare` computes nothing:
key `cards`, the summaries of every version's cards (prompts compared)."""

from evaluation.judge_card import card_options, judge_card
from evaluation.reports import start_judge_card
from jobs.progress import terminal_progress
from judges.backends import EndpointUnavailable
from judges.prompts import read_objective
from judges.selectors import judge_cards
from judges.services import get_judge
from retrieval.errors import InputError
from retrieval.management.arguments import collection_named
from retrieval.management.base import JsonCommand


class Command(JsonCommand):
    help = "Compute a judge's card (agreement with people, leaderboard agreement, bias probes) on a collection."

    def add_command_arguments(self, parser):
        parser.add_argument("name", help="The judge's name (its latest version).")
        parser.add_argument("--collection", default=None, help="Collection name (required unless --compare).")
        parser.add_argument("--human", default=None, help="imported (default) or study:ID: the human labels.")
        parser.add_argument("--runs", default="", help="Comma-separated run ids for leaderboard agreement.")
        parser.add_argument("--metrics", default="", help="Measures for leaderboard agreement.")
        parser.add_argument("--probe-study", type=int, default=None, help="A proxy study for the position probe.")
        parser.add_argument("--samples", type=int, default=1, help="Answers per pair (2+: calibration, consistency).")
        parser.add_argument("--seed", default=None, help="Seed of the bootstrap over queries (default 0).")
        parser.add_argument("--bootstrap", default=None, help="Bootstrap resamples (default 1000).")
        parser.add_argument(
            "--sample", default=None, help="Ask the judge N pairs, stratified by human grade per query (default all)."
        )
        parser.add_argument("--sample-seed", default=None, help="Seed of the --sample draw (default 0).")
        parser.add_argument("--objective-file", default=None, help="BIRCO's task objective, for pairs outside a study.")
        parser.add_argument("--async", dest="run_async", action="store_true", help="Send the work to a Celery worker.")
        parser.add_argument("--compare", action="store_true", help="List the cards of every version; compute nothing.")

    def run(self, *, name, collection, run_async, compare, **options):
        judge = get_judge(name)
        if compare:
            cards = [
                {**{k: v for k, v in card.items() if k != "payload"}, "created_at": card["created_at"].isoformat()}
                for card in judge_cards(judge.name)
            ]
            return {"judge": judge.name, "cards": cards}
        if not collection:
            raise InputError("name the collection the card is for", field="collection")
        chosen = {
            "human": options["human"],
            "run_ids": [part.strip() for part in options["runs"].split(",") if part.strip()],
            "metrics": options["metrics"],
            "probe_study": options["probe_study"],
            "samples": options["samples"],
            "seed": options["seed"],
            "bootstrap": options["bootstrap"],
            "sample": options["sample"],
            "sample_seed": options["sample_seed"],
            "objective": read_objective(options["objective_file"]),
        }
        if run_async:
            job = start_judge_card(judge, collection_named(collection), **chosen)
            return {"judge": judge.name, "version": judge.version, "job_id": job.pk, "queue": job.queue}
        try:
            card = judge_card(
                judge,
                card_options(judge, collection_named(collection), **chosen),
                progress=terminal_progress(f"card of {judge}"),
            )
        except EndpointUnavailable as exc:
            raise InputError(str(exc), field="judge") from None
        return {"card": card.pk, "judge": judge.name, "version": judge.version, "prompt": card.prompt, **card.payload}
