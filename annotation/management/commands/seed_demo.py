"""`seed_demo [--json]`: demo accounts, the demo book, a BM25 run and a proxy study, created once
and found again on later calls (scripts/run.sh calls it on every start). The work is in
demo/seed.py; this prints the credentials."""

from demo.seed import seed_demo
from jobs.progress import terminal_progress
from retrieval.management.base import JsonCommand


class Command(JsonCommand):
    help = "Create (once) the demo accounts, demo collection, a BM25 run on it and a demo proxy study."

    def run(self, **options):
        return seed_demo(progress=terminal_progress("seed_demo"))

    def format_text(self, summary):
        lines = [
            f"Demo collection '{summary['collection']}' ({summary['queries']} queries), "
            f"BM25 run {summary['run_id']}, study {summary['study_id']} ({summary['items']} items).",
            "Demo accounts (local use only):",
        ]
        lines += [f"  {a['role']:<10} {a['username']} / {a['password']}" for a in summary["accounts"]]
        return "\n".join(lines)
