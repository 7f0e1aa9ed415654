"""Base for Marginalia's management commands: `--json` prints one JSON object as the last line of
stdout (the contract checks read it), bad input becomes a one-line error and a non-zero exit."""

from __future__ import annotations

import json
import os
import sys
from argparse import ArgumentParser
from collections.abc import Iterable

from django.core.management.base import BaseCommand, CommandError

from jobs.errors import BrokerUnavailable
from marginalia.command_checks import DATA_COMMAND_CHECKS
from retrieval.errors import InputError
from retrieval.input_rules import ascii_float, ascii_int, character_problem


def write_lines(command: BaseCommand, lines: Iterable[str]) -> None:
    """Write `lines` to the command's stdout. A reader that stops early (`export_study 3 | head`)
    closes the pipe: that ends the output quietly, exit status 0, instead of a BrokenPipeError
    traceback; stdout then points at /dev/null so the interpreter's last flush cannot fail."""
    try:
        for line in lines:
            command.stdout.write(line)
        command.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def ascii_number_options(parser: ArgumentParser) -> ArgumentParser:
    """Make the parser's int and float options follow the input rule (ASCII digits: argparse's
    int() and float() would read '٣' as 3 and '1_0' as 10). Returns the parser."""
    for action in parser._actions:
        if action.type is int:
            action.type = ascii_int
        elif action.type is float:
            action.type = ascii_float
    return parser


def refuse_unstorable_options(options: dict) -> None:
    """A NUL or a lone surrogate in any text option (a script's call_command, a file name) is
    refused with one line naming the option, as in files and uploads: Postgres cannot store it."""
    for name, value in options.items():
        for text in value if isinstance(value, list | tuple) else [value]:
            if isinstance(text, str) and (problem := character_problem(text)):
                raise CommandError(f"--{name.replace('_', '-')}: {problem[1]}")


class JsonCommand(BaseCommand):
    """Subclasses define `run(**options) -> dict`, the summary printed at the end."""

    requires_system_checks = DATA_COMMAND_CHECKS

    def create_parser(self, prog_name, subcommand, **kwargs):
        return ascii_number_options(super().create_parser(prog_name, subcommand, **kwargs))

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print the summary as one JSON line.")
        self.add_command_arguments(parser)

    def add_command_arguments(self, parser):
        """Subclasses add their own arguments here."""

    def handle(self, *args, **options):
        refuse_unstorable_options(options)
        try:
            summary = self.run(**options)
        except (InputError, BrokerUnavailable) as exc:
            raise CommandError(str(exc)) from exc
        text = json.dumps(summary, sort_keys=True) if options["json"] else self.format_text(summary)
        write_lines(self, [text])

    def format_text(self, summary: dict) -> str:
        """The summary for a person to read; subclasses with nested results render tables."""
        return "\n".join(f"{key}: {value}" for key, value in summary.items())
