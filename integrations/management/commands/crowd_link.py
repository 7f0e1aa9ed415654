"""`crowd_link STUDY_ID [--completion-code C] [--completion-url URL] [--screened-out-code C]
[--quota N | --no-quota] [--confirm-below-done] [--deactivate | --activate] [--screen-out WHO
[--reason R]] [--base-url URL] [--json]`: make or change a study's crowd link and print the URL
to give Prolific (on the platform's public address). The quota is the link's own limit per
participant, separate from the study's per-annotator cap; one below what a participant has
already judged is refused with the numbers unless --confirm-below-done. Keys `study`, `url`,
`completion_code`, `completion_url`, `screened_out_code`, `quota`, `active`, `participants`
(name "Participant-N" → platform id, status, judged), plus `screened_out` (the name) when one
was."""

from annotation.services import get_study
from retrieval.management.base import JsonCommand

from ...selectors import participant_rows
from ...services.crowd import completion_url, configure_crowd_link, screen_out, study_url


class Command(JsonCommand):
    help = "Make or change a study's crowd (Prolific/MTurk) link; screen participants out."

    def add_command_arguments(self, parser):
        parser.add_argument("study_id", type=int)
        parser.add_argument("--completion-code")
        parser.add_argument("--completion-url", help="Where finished participants go; {code} is replaced.")
        parser.add_argument("--screened-out-code")
        quota = parser.add_mutually_exclusive_group()
        quota.add_argument("--quota", type=int, help="Items per participant (separate from the study's cap).")
        quota.add_argument("--no-quota", action="store_true", help="Remove the quota.")
        parser.add_argument(
            "--confirm-below-done",
            action="store_true",
            help="Set a quota below what a participant has judged anyway (they stop where they are).",
        )
        active = parser.add_mutually_exclusive_group()
        active.add_argument("--deactivate", action="store_true", help="Stop taking new visits.")
        active.add_argument("--activate", action="store_true")
        parser.add_argument("--screen-out", metavar="WHO", help="Screen this participant out (name or platform id).")
        parser.add_argument("--reason", default="screened out")
        parser.add_argument("--base-url", help="Site address for the link (default: the platform's public address).")

    def run(self, **options) -> dict:
        study = get_study(options["study_id"])
        quota = None if options["no_quota"] else options["quota"] if options["quota"] is not None else ...
        active = False if options["deactivate"] else True if options["activate"] else None
        link = configure_crowd_link(
            study,
            completion_code=options["completion_code"],
            completion_url=options["completion_url"],
            screened_out_code=options["screened_out_code"],
            quota=quota,
            active=active,
            confirm_below_done=options["confirm_below_done"],
        )
        summary = {}
        if options["screen_out"]:
            screened = screen_out(link, options["screen_out"], reason=options["reason"])
            summary["screened_out"] = screened.user.username
        return {
            "study": study.pk,
            "url": study_url(link, options["base_url"]),
            "completion_code": link.completion_code,
            "completion_url": completion_url(link),
            "screened_out_code": link.screened_out_code,
            "quota": link.quota,
            "active": link.active,
            "participants": {
                row["name"]: {"participant": row["participant"], "status": row["status"], "judged": row["judged"]}
                for row in participant_rows(link)
            },
            **summary,
        }
