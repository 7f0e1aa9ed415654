"""Python client for the Marginalia REST API (no Django needed).

from marginalia_client import Marginalia
staff = Marginalia.login("https://marginalia.example.org", "curator", "password")
run = staff.start_run("birco-relic-dev", retriever="bm25", depth=100)
staff.wait(run.job)                                  # a tqdm progress bar until the job ends
study = staff.create_study(name="pilot", kind="proxy", collection="birco-relic-dev",
                           negatives_run=run.id, items=20)
staff.judgments(study["id"])                         # a pandas DataFrame, one row per judgment
"""

from .client import ApiError, Job, Marginalia, Run

__all__ = ["ApiError", "Job", "Marginalia", "Run"]
