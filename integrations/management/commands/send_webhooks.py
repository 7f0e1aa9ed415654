"""`send_webhooks [--all] [--json]`: deliver the webhook outbox now, in this process: one attempt
at each pending delivery that is due (`--all`: every pending one, backoff or not). Keys
`attempted`, `delivered`, `failed`, `retrying`, `pending`."""

from retrieval.management.base import JsonCommand

from ...services.webhooks import deliver_due


class Command(JsonCommand):
    help = "Deliver pending webhook events now (the worker and the periodic redelivery do this on their own)."

    def add_command_arguments(self, parser):
        parser.add_argument("--all", action="store_true", help="Also deliveries still waiting for their backoff.")

    def run(self, **options) -> dict:
        return deliver_due(force=options["all"])
