"""`study_quality STUDY_ID [--designate ROLE=COUNT] [--refresh-flags] [--block USER --reason R
[--keep-judgments]] [--unblock USER] [--sample-peer-review [--seed S]] [--json]`: act on a
study's quality control, then report it. Actions run in the order listed; the summary is
`quality_overview` (per-annotator gold accuracy, median seconds, peer pass rate, qualification,
blocks and open flags) plus one key per action taken."""

from django.contrib.auth import get_user_model
from django.db import transaction

from annotation.services import get_study
from annotation.services.quality import (
    DESIGNATABLE_ROLES,
    block_annotator,
    designate_items,
    quality_overview,
    refresh_flags,
    sample_for_peer_review,
    unblock_annotator,
)
from retrieval.errors import InputError
from retrieval.input_rules import is_digits
from retrieval.management.base import JsonCommand


class Command(JsonCommand):
    help = "Refresh flags, block or unblock annotators, sample peer reviews and report a study's quality control."

    def add_command_arguments(self, parser):
        parser.add_argument("study_id", type=int)
        parser.add_argument(
            "--designate",
            metavar="ROLE=COUNT",
            help=f"Draw COUNT unjudged work items with known answers as {' or '.join(DESIGNATABLE_ROLES)} items.",
        )
        parser.add_argument("--refresh-flags", action="store_true", help="Recompute the automatic flags.")
        parser.add_argument("--block", metavar="USER", help="Block USER from the study (needs --reason).")
        parser.add_argument("--reason", help="Why USER is blocked.")
        parser.add_argument(
            "--keep-judgments",
            action="store_true",
            help="With --block: keep counting the blocked annotator's judgments.",
        )
        parser.add_argument("--unblock", metavar="USER", help="Let USER work on the study again.")
        parser.add_argument(
            "--sample-peer-review",
            action="store_true",
            help="Assign the study's peer_review_rate sample of each annotator's judgments to others.",
        )
        parser.add_argument(
            "--seed", type=int, help="Seed for --designate and --sample-peer-review (default: the study's)."
        )

    def run(self, **options) -> dict:
        study = get_study(options["study_id"])
        if options["block"] and not options["reason"]:
            raise InputError("--block needs --reason", field="reason")
        actions = {}
        with transaction.atomic():  # one failing action leaves every other undone
            if options["designate"]:
                role, count = _role_and_count(options["designate"])
                chosen = designate_items(study, role, count=count, seed=options["seed"])
                actions["designated"] = {"role": role, "items": [item.pk for item in chosen]}
            if options["refresh_flags"]:
                actions["flags"] = refresh_flags(study)
            if options["block"]:
                block = block_annotator(
                    study,
                    _user(options["block"], "block"),
                    by=None,
                    reason=options["reason"],
                    exclude_judgments=not options["keep_judgments"],
                )
                actions["blocked"] = {"annotator": options["block"], "exclude_judgments": block.exclude_judgments}
            if options["unblock"]:
                actions["unblocked"] = {
                    "annotator": options["unblock"],
                    "was_blocked": unblock_annotator(study, _user(options["unblock"], "unblock")),
                }
            if options["sample_peer_review"]:
                actions["peer_review_sample"] = sample_for_peer_review(study, seed=options["seed"])
        return {**quality_overview(study), **actions}

    def format_text(self, summary: dict) -> str:
        lines = [
            f"study {summary['study']} ({summary['kind']}): items {summary['items']}, "
            f"study median {summary['study_median_seconds']} s, open flags {summary['open_flags']}, "
            f"disagreements {summary['disagreements']} ({summary['adjudicated']} adjudicated)"
        ]
        for username, row in summary["annotators"].items():
            gold, peer = row["gold"], row["peer_review"]
            lines.append(
                f"  {username}: {row['counted_judgments']} counted, "
                f"gold {_fraction(gold)}, median {row['median_seconds']} s, peer {_fraction(peer)}, "
                f"qualification {row['qualification']}"
                f"{', BLOCKED' if row['blocked'] else ''}"
                f"{', flags: ' + ', '.join(row['open_flags']) if row['open_flags'] else ''}"
            )
        lines += [
            f"{key}: {summary[key]}"
            for key in ("designated", "flags", "blocked", "unblocked", "peer_review_sample")
            if key in summary
        ]
        return "\n".join(lines)


def _fraction(rate: dict | None) -> str:
    return "-" if rate is None else f"{rate['hits']}/{rate['total']}"


def _user(username: str, option: str):
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise InputError(f"no user named {username!r}", field=option)
    return user


def _role_and_count(value: str) -> tuple[str, int]:
    role, _, count = value.partition("=")
    if role not in DESIGNATABLE_ROLES or not is_digits(count):
        raise InputError(
            f"expected ROLE=COUNT with ROLE one of {', '.join(DESIGNATABLE_ROLES)}, got {value!r}", field="designate"
        )
    return role, int(count)
