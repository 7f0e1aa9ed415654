"""`send_webhooks [--all] [--json]`: deliver the webhook outbox now, in this process: one attempt
at each pending delivery that is due (`--all`: every pending one, backoff or not). Keys
`attempted`, `delivered`, `failed`, `retrying`, `pending`. A delivery that cannot be sent is
recorded as such on its row and the others go on; the command itself exits 0."""

from retrieval.management.base import JsonCommand

from ...services.delivery import deliver_due


class Command(JsonCommand):
    help = "Deliver pending webhook events now (the worker and the periodic redelivery do this on their own)."

    def add_command_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="Also deliveries still waiting for their backoff.")

    def run(self, **options) -> dict:
        return deliver_due(force=options["all"])
