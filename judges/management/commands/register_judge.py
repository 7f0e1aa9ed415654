"""register_judge NAME --backend local|openai|run [--config JSON] [--json]: add a judge, or a new
version of it when its settings change. A key is never part of a judge: register it with
`judge_secret NAME` and give `api_key_secret`, its name. An endpoint's address must pass the
outbound guard (public, or listed in MARGINALIA_OUTBOUND_ALLOW)."""

import json

from judges.services import register_judge
from retrieval.errors import InputError
from retrieval.management.base import JsonCommand


class Command(JsonCommand):
    help = "Register a judge (a new version when the settings differ from its latest)."

    def add_command_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--backend", required=True, choices=["local", "openai", "run", "ensemble"])
        parser.add_argument(
            "--config", default="{}", help='The settings as JSON, e.g. {"base_url": "...", "model": "..."}.'
        )

    def run(self, *, name, backend, config, **options):
        try:
            parsed = json.loads(config)
        except json.JSONDecodeError as exc:
            raise InputError(f"not JSON: {exc.msg} at column {exc.colno}", field="settings") from None
        if not isinstance(parsed, dict):
            raise InputError("must be a JSON object", field="settings")
        judge = register_judge(name, backend, parsed)
        return {"judge": judge.name, "version": judge.version, "backend": judge.backend, "settings": judge.settings}
