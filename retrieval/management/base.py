"""Base for Marginalia's management commands: `--json` prints one JSON object as the last line of
stdout (the contract checks read it), bad input becomes a one-line error and a non-zero exit."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from jobs.services import BrokerUnavailable
from retrieval.errors import InputError


class JsonCommand(BaseCommand):
    """Subclasses define `run(**options) -> dict`, the summary printed at the end."""

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print the summary as one JSON line.")
        self.add_command_arguments(parser)

    def add_command_arguments(self, parser):
        """Subclasses add their own arguments here."""

    def handle(self, *args, **options):
        try:
            summary = self.run(**options)
        except (InputError, BrokerUnavailable) as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps(summary, sort_keys=True))
        else:
            self.stdout.write(self.format_text(summary))

    def format_text(self, summary: dict) -> str:
        """The summary for a person to read; subclasses with nested results render tables."""
        return "\n".join(f"{key}: {value}" for key, value in summary.items())
