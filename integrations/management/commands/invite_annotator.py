"""`invite_annotator --study ID [--study ID ...] [--email ADDRESS] [--no-email]
[--every-open-study] [--base-url URL] [--json]`: a one-time invitation link to the studies (on
the platform's public address), e-mailed when an address is given (EMAIL_BACKEND: the console by
default, SMTP when DJANGO_EMAIL_HOST is set). The account it makes is granted the studies and
works on them only, unless --every-open-study. Keys `invitation`, `email`, `studies`, `url`
(shown only now), `emailed`, `only_invited_studies`, `expires_at`."""

from annotation.services import get_study
from retrieval.management.base import JsonCommand

from ...services.invitations import invite_annotator


class Command(JsonCommand):
    help = "Invite an annotator to studies with a one-time link (e-mailed when --email is given)."

    def add_command_arguments(self, parser):
        parser.add_argument("--study", type=int, action="append", default=[], help="A study id (repeatable).")
        parser.add_argument("--email", default="", help="E-mail the link to this address.")
        parser.add_argument("--no-email", action="store_true", help="Do not send e-mail; only print the link.")
        parser.add_argument(
            "--every-open-study",
            action="store_true",
            help="Let the new account work on every open study, not only the invited ones.",
        )
        parser.add_argument("--base-url", help="Site address for the link (default: the platform's public address).")

    def run(self, **options) -> dict:
        studies = [get_study(study_id) for study_id in options["study"]]
        issued = invite_annotator(
            studies=studies,
            email=options["email"],
            send=not options["no_email"],
            base_url=options["base_url"],
            only_invited_studies=not options["every_open_study"],
        )
        invitation = issued.invitation
        invitation.refresh_from_db()
        return {
            "invitation": invitation.pk,
            "email": invitation.email,
            "studies": [study.pk for study in studies],
            "url": issued.url(options["base_url"]),
            "emailed": invitation.emailed_at is not None,
            "only_invited_studies": invitation.only_invited_studies,
            "expires_at": invitation.expires_at.isoformat(),
        }
