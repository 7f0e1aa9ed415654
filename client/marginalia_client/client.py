"""The client: one `requests` session with token authentication, JSON in and out, paginated
lists followed to the end, lists as pandas DataFrames, throttling (429) and brief unavailability
(503) waited out as the server's Retry-After asks, and jobs waited on with a progress bar."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import requests
from tqdm.auto import tqdm

RETRY_STATUSES = (429, 503)
FINISHED_JOB_STATUSES = ("succeeded", "failed", "cancelled")


class ApiError(Exception):
    """A refused request: `status` is the HTTP status, `detail` the server's JSON answer (which
    names the offending field for a 400)."""

    def __init__(self, status: int, detail: Any, url: str):
        super().__init__(f"{status} from {url}: {detail}")
        self.status, self.detail, self.url = status, detail, url


@dataclass(frozen=True)
class Job:
    """A background job as the server last reported it."""

    id: int
    kind: str
    status: str
    progress: float
    message: str
    error: str
    result: Any

    @classmethod
    def from_json(cls, data: dict) -> Job:
        return cls(
            id=data["id"],
            kind=data.get("kind", ""),
            status=data["status"],
            progress=float(data.get("progress") or 0.0),
            message=data.get("message") or "",
            error=data.get("error") or "",
            result=data.get("result"),
        )

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_JOB_STATUSES


@dataclass(frozen=True)
class Run:
    """A retrieval run; `job` is the id of the job computing it."""

    id: int
    collection: int
    status: str
    job: int | None
    parameters: dict
    evaluation: dict | None = None

    @classmethod
    def from_json(cls, data: dict) -> Run:
        return cls(
            id=data["id"],
            collection=data["collection"],
            status=data["status"],
            job=data.get("job"),
            parameters=data.get("parameters") or {},
            evaluation=data.get("evaluation"),
        )


class Marginalia:
    """A connection to one Marginalia server as one account (staff or annotator)."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 60,
        max_retries: int = 5,
        session: requests.Session | None = None,
    ):
        self.url = url.rstrip("/")
        self.timeout, self.max_retries = timeout, max_retries
        self.session = session or requests.Session()
        self.session.headers.update({"Authorization": f"Token {token}", "Accept": "application/json"})

    @classmethod
    def login(cls, url: str, username: str, password: str, **options) -> Marginalia:
        """Exchange a username and password for the account's API token (POST /api/auth/token/)."""
        anonymous = cls.__new__(cls)
        anonymous.url, anonymous.session = url.rstrip("/"), requests.Session()
        anonymous.timeout, anonymous.max_retries = options.get("timeout", 60), options.get("max_retries", 5)
        token = anonymous._request("POST", "/api/auth/token/", json={"username": username, "password": password})
        return cls(url, token["token"], **options)

    # --- plumbing -------------------------------------------------------------------------------

    def _request(self, method: str, path: str, *, raw: bool = False, **kwargs):
        url = path if path.startswith("http") else f"{self.url}{path}"
        if raw:  # text answers (TREC runs, qrels) are not JSON
            kwargs["headers"] = {"Accept": "text/plain, */*"}
        for attempt in range(self.max_retries + 1):
            response = self.session.request(method, url, timeout=self.timeout, **kwargs)
            if response.status_code not in RETRY_STATUSES or attempt == self.max_retries:
                break
            time.sleep(_retry_after(response, attempt))
        if response.status_code >= 400:
            try:
                detail = response.json()
            except ValueError:
                detail = response.text[:500]
            raise ApiError(response.status_code, detail, url)
        if raw:
            return response.text
        return response.json() if response.content else None

    def _get_all(self, path: str, params: dict | None = None) -> list[dict]:
        """Every row of a list endpoint, following DRF's pages (`next`) or taking a bare list."""
        data = self._request("GET", path, params=params)
        if isinstance(data, list):
            return data
        rows = list(data["results"])
        while data.get("next"):
            data = self._request("GET", data["next"])
            rows.extend(data["results"])
        return rows

    # --- uploads --------------------------------------------------------------------------------

    def upload_kinds(self) -> pd.DataFrame:
        """What can be uploaded (book, relic, beir, trec_run, qrels, judgments, ...): file endings,
        options and the required ones."""
        return pd.DataFrame(self._request("GET", "/api/uploads/")["kinds"])

    def upload(self, kind: str, path: str | Path, **options) -> Job:
        """Upload a file to import (POST /api/uploads/) with its options (title, author, name,
        split, collection, study, as the kind needs); returns the queued job: `wait(job.id)`."""
        path = Path(path)
        data = self._request(
            "POST",
            "/api/uploads/",
            data={"kind": kind, **{name: str(value) for name, value in options.items()}},
            files={"file": (path.name, path.read_bytes())},
        )
        return Job.from_json(data)

    # --- collections and runs -------------------------------------------------------------------

    def collections(self) -> pd.DataFrame:
        return pd.DataFrame(self._get_all("/api/collections/"))

    def collection(self, collection: int | str) -> dict:
        """One collection by id or name."""
        if isinstance(collection, int):
            return self._request("GET", f"/api/collections/{collection}/")
        rows = [row for row in self._get_all("/api/collections/") if row["name"] == collection]
        if not rows:
            raise ApiError(404, f"no collection named {collection!r}", f"{self.url}/api/collections/")
        return rows[0]

    def queries(self, collection: int | str) -> pd.DataFrame:
        return pd.DataFrame(self._get_all("/api/queries/", {"collection": self.collection(collection)["id"]}))

    def runs(self) -> pd.DataFrame:
        return pd.DataFrame(self._get_all("/api/runs/"))

    def run(self, run_id: int) -> Run:
        """A run with its evaluation (metrics and standard errors) once it is done."""
        return Run.from_json(self._request("GET", f"/api/runs/{run_id}/"))

    def start_run(self, collection: int | str, retriever: str = "bm25", **parameters) -> Run:
        """Queue a run (k1, b, context_left, context_right, depth, model); wait on `run.job`."""
        body = {"collection": self.collection(collection)["id"], "retriever": retriever, **parameters}
        return Run.from_json(self._request("POST", "/api/runs/", json=body))

    def run_trec(self, run_id: int) -> str:
        return self._request("GET", f"/api/runs/{run_id}/trec/", raw=True)

    # --- jobs -----------------------------------------------------------------------------------

    def job(self, job_id: int) -> Job:
        return Job.from_json(self._request("GET", f"/api/jobs/{job_id}/"))

    def wait(self, job_id: int, *, timeout: float | None = None, poll: float = 1.0, progress: bool = True) -> Job:
        """Poll the job until it ends, showing its progress (0..1) and message in a tqdm bar.
        Returns the finished job; raises TimeoutError after `timeout` seconds and ApiError when
        the job failed (its error as the detail)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with tqdm(total=1000, desc=f"job {job_id}", disable=not progress, unit="‰") as bar:
            while True:
                job = self.job(job_id)
                bar.update(int(job.progress * 1000) - bar.n)
                bar.set_postfix_str(job.message[:60])
                if job.finished:
                    break
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"job {job_id} is still {job.status} after {timeout} s")
                time.sleep(poll)
        if job.status == "failed":
            raise ApiError(500, job.error, f"{self.url}/api/jobs/{job_id}/")
        return job

    # --- studies --------------------------------------------------------------------------------

    def studies(self) -> pd.DataFrame:
        return pd.DataFrame(self._get_all("/api/studies/"))

    def study(self, study_id: int) -> dict:
        return self._request("GET", f"/api/studies/{study_id}/")

    def create_study(self, **fields) -> dict:
        """Create a study of any kind (the fields of POST /api/studies/: name, kind, collection,
        negatives_run, items, candidates, judgments_per_item, runs, ...); returns the study with
        the creation summary (`items`, `skipped`) merged in."""
        created = self._request("POST", "/api/studies/", json=fields)
        return {**created.pop("study"), **created}

    def report(self, study_id: int) -> dict:
        return self._request("GET", f"/api/studies/{study_id}/report/")

    def judgments(self, study_id: int) -> pd.DataFrame:
        """Every judgment of the study, one row each (voided ones flagged; `correct` against the
        gold or expected answer; `submitted_at` as timestamps)."""
        rows = self._request("GET", "/api/judgments/", params={"study": study_id, "format": "json"})
        frame = pd.DataFrame(rows)
        if not frame.empty:
            frame["submitted_at"] = pd.to_datetime(frame["submitted_at"])
        return frame

    def qrels(self, study_id: int, aggregate: str = "majority") -> str:
        return self._request("GET", f"/api/studies/{study_id}/qrels/", params={"aggregate": aggregate}, raw=True)

    # --- annotating -----------------------------------------------------------------------------

    def next_item(self, study_id: int) -> dict:
        """The signed-in annotator's current or next item (`finished` true when none is left)."""
        return self._request("GET", f"/api/annotate/{study_id}/next/")

    def submit(self, study_id: int, item: int, **answer) -> dict:
        """Answer an item: `position` or `candidate` (proxy), or `label`/`selections` with
        `spans`, `rubric`, `rationale`; `seconds` spent."""
        return self._request("POST", f"/api/annotate/{study_id}/submit/", json={"item": item, **answer})


def _retry_after(response: requests.Response, attempt: int) -> float:
    """The server's Retry-After in seconds, else a short exponential wait."""
    try:
        return max(0.0, float(response.headers["Retry-After"]))
    except (KeyError, ValueError):
        return min(2.0**attempt, 30.0)
