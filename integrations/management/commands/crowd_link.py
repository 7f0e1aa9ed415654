"""`crowd_link STUDY_ID [--completion-code C] [--completion-url URL] [--screened-out-code C]
[--quota N | --no-quota] [--deactivate | --activate] [--screen-out PARTICIPANT [--reason R]]
[--json]`: make or change a study's crowd link and print the URL to give Prolific. Keys `study`,
`url`, `completion_code`, `completion_url`, `screened_out_code`, `quota`, `active`,
`participants` (id → status, judged), plus `screened_out` when one was."""

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
        quota.add_argument("--quota", type=int, help="Items per participant (the study's per-annotator cap).")
        quota.add_argument("--no-quota", action="store_true", help="Remove the cap.")
        active = parser.add_mutually_exclusive_group()
        active.add_argument("--deactivate", action="store_true", help="Stop taking new visits.")
        active.add_argument("--activate", action="store_true")
        parser.add_argument("--screen-out", metavar="PARTICIPANT", help="Screen this participant id out.")
        parser.add_argument("--reason", default="screened out")
        parser.add_argument("--base-url", help="Site address for the link (default MARGINALIA_BASE_URL).")

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
        )
        summary = {}
        if options["screen_out"]:
            screened = screen_out(link, options["screen_out"], reason=options["reason"])
            summary["screened_out"] = screened.external_id
        study.refresh_from_db()
        return {
            "study": study.pk,
            "url": study_url(link, options["base_url"]),
            "completion_code": link.completion_code,
            "completion_url": completion_url(link),
            "screened_out_code": link.screened_out_code,
            "quota": study.max_items_per_annotator,
            "active": link.active,
            "participants": {
                row["participant"]: {"status": row["status"], "judged": row["judged"]} for row in participant_rows(link)
            },
            **summary,
        }
