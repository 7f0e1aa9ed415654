"""judge_secret NAME [--from-env VARIABLE | --delete] [--json]: register or change the judge
secret NAME (an API key that `register_judge --config '{"api_key_secret": NAME, ...}'` names),
its value read from the first line of stdin (never an argument, which `ps` would show) or, once,
from a variable of the calling shell's environment; or remove it. Keys `secret`, `hint`,
`action` (created | changed | deleted). The value is never printed."""

import os
import sys

from judges.models import JudgeSecret
from judges.secrets import change_secret, delete_secret, store_secret
from retrieval.errors import InputError
from retrieval.management.base import JsonCommand


class Command(JsonCommand):
    help = "Register, change or delete a judge secret (an API key judges name; the value comes from stdin)."

    def add_command_arguments(self, parser):
        parser.add_argument("name")
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--from-env", metavar="VARIABLE", help="Take the value from this environment variable.")
        source.add_argument("--delete", action="store_true", help="Remove the secret.")

    def run(self, *, name, from_env, delete, **options):
        existing = JudgeSecret.objects.filter(name=name).first()
        if delete:
            if existing is None:
                raise InputError(f"no judge secret named {name!r}", field="name")
            delete_secret(existing)
            return {"secret": name, "hint": existing.hint, "action": "deleted"}
        if from_env:
            value = os.environ.get(from_env)
            if not value:
                raise InputError(f"environment variable {from_env} is not set", field="from_env")
        else:
            value = sys.stdin.readline().rstrip("\r\n")
        secret = change_secret(existing, value) if existing else store_secret(name, value)
        return {"secret": secret.name, "hint": secret.hint, "action": "changed" if existing else "created"}
