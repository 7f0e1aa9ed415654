"""A study's first week, played in a real Chromium against the whole platform (issue 21, its
first "Done when"): a web server process, Redis, and the workers exactly as run_platform starts
them (one per queue, tests/live_platform.py), on a slice of BIRCO's WhatsThatBook dev split.

Staff upload the slice from the dashboard, start a BM25 run and a dense run (the shipped
all-MiniLM-L6-v2), create a relevance study over both runs with the study form, set a cap per
annotator, invite a scholar and open a crowd link with a quota on the recruiting page. Then two
lab annotators, the scholar and two Prolific participants judge at the same time, each in a
browser context of their own, while an endpoint judge (a real OpenAI-compatible server on this
machine that takes a while per answer) answers the same study on the "long" queue, and staff
start another BM25 run meanwhile. Nobody is locked out, the study stays open to everyone after the
invitation is accepted, the crowd quota and the lab annotators' cap are separate limits, the
counts on the annotator, study, quality and report pages agree with what was done, the BM25 run
started during the judging ends before the judge does, and the report carries humans and judge.
"""

import json
import sqlite3
import zipfile
from collections import Counter
from contextlib import ExitStack, contextmanager
from datetime import datetime
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from jobs.management.commands.run_platform import stop_process
from tests.browser.conftest import PASSWORD, WAIT_MS, signed_in_tab
from tests.browser.test_uploads import start_web
from tests.judges.conftest import LOCAL_MODEL_SERVER, start_chat_server
from tests.live_platform import WAIT_SECONDS, manage, wait_for_job, worker_log

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.data]

QUERIES = 4  # of the WhatsThatBook dev split, with their relevant books and the first others
OTHER_BOOKS = 40
DEPTH = 3  # each run's top 3 per query are pooled into the study
JUDGMENTS_PER_ITEM = 3
CAP = 5  # the lab annotators' cap per person
QUOTA = 2  # the crowd link's quota per participant
LAB_JUDGED = 4  # each lab annotator judges more than the crowd quota and less than the cap
SCHOLAR_JUDGED = 3
JUDGE_SECONDS_PER_ANSWER = 1.5
OPEN_TO_EVERYONE = f"Every active annotator may work on the study. Each judges at most {CAP} items."
CROWD = ("5f0c1a2b3c4d5e6f7a8b9c01", "5f0c1a2b3c4d5e6f7a8b9c02")


@pytest.fixture(scope="module")
def platform(platform):
    """The shared platform, allowed to reach the test's model server on 127.0.0.1."""
    platform["env"]["MARGINALIA_OUTBOUND_ALLOW"] = ",".join(LOCAL_MODEL_SERVER)
    return platform


@pytest.fixture(scope="module")
def web(platform, platform_workers):
    """The web server beside the workers run_platform starts, and the lab's accounts."""
    manage(
        platform,
        "shell",
        "-c",
        "from django.contrib.auth.models import User\n"
        f"User.objects.create_user('curator', password='{PASSWORD}', is_staff=True)\n"
        f"for name in ('lab1', 'lab2'): User.objects.create_user(name, password='{PASSWORD}')",
    )
    process, url = start_web(platform)
    yield url
    stop_process(process)


@pytest.fixture(scope="module")
def slow_judge(platform):
    """A model server that answers "relevant" after a pause, registered as the judge `slow-llm`."""
    server = start_chat_server(platform["folder"], "--answer", "SCORE: 1", "--delay", str(JUDGE_SECONDS_PER_ANSWER))
    settings = {"base_url": server.base_url, "model": "served", "batch_size": 4, "concurrency": 1}
    manage(platform, "register_judge", "slow-llm", "--backend", "openai", "--config", json.dumps(settings))
    yield "slow-llm"
    stop_process(server.process)


@pytest.fixture
def wtb_slice(shared_data, tmp_path):
    """A zip in BEIR's layout of the first QUERIES judged queries of WhatsThatBook, their
    relevant books and the first OTHER_BOOKS books of the corpus (built here, never committed)."""
    source = shared_data / "birco-wtb-dev"
    qrels = [line.split("\t") for line in (source / "qrels.tsv").read_text().splitlines()[1:]]
    queries = list(dict.fromkeys(query for query, _, score in qrels if score.strip() != "0"))[:QUERIES]
    relevant = {doc for query, doc, score in qrels if query in queries and score.strip() != "0"}
    corpus = []
    for line in (source / "corpus.jsonl").read_text().splitlines():
        doc_id = json.loads(line)["_id"]
        if doc_id in relevant or len(corpus) < OTHER_BOOKS + len(relevant):
            corpus.append((doc_id, line))
    kept = {doc_id for doc_id, _ in corpus}
    archive = tmp_path / "wtb-week.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("wtb-week/corpus.jsonl", "\n".join(line for _, line in corpus) + "\n")
        lines = (source / "queries.jsonl").read_text().splitlines()
        bundle.writestr(
            "wtb-week/queries.jsonl", "".join(f"{line}\n" for line in lines if json.loads(line)["_id"] in queries)
        )
        kept_qrels = ["\t".join(row) for row in qrels if row[0] in queries and row[1] in kept]
        bundle.writestr("wtb-week/qrels.tsv", "\n".join(["query-id\tcorpus-id\tscore", *kept_qrels]) + "\n")
    return archive


def rows(platform, sql: str, *args) -> list[sqlite3.Row]:
    with sqlite3.connect(platform["database"], timeout=30) as connection:
        connection.row_factory = sqlite3.Row
        return connection.execute(sql, args).fetchall()


def start_run(staff, retriever: str) -> int:
    """Through the dashboard's "Start a run" form; the id of the run it queued."""
    staff.goto("/dashboard/")
    form = staff.locator("#start-run")
    form.get_by_label("Retriever").select_option(retriever)
    form.get_by_label("Depth").fill(str(DEPTH))
    before = set(staff.locator("#runs tr[data-run]").evaluate_all("rows => rows.map(r => r.dataset.run)"))
    form.get_by_role("button", name="Start run").click()
    expect(staff.locator("ul.messages")).to_be_visible()
    staff.goto("/dashboard/")
    after = set(staff.locator("#runs tr[data-run]").evaluate_all("rows => rows.map(r => r.dataset.run)"))
    (run_id,) = after - before
    return int(run_id)


def run_job(platform, run_id: int) -> int:
    return rows(platform, "SELECT job_id FROM retrieval_run WHERE id = ?", run_id)[0]["job_id"]


def judge(page, progress_after: str) -> None:
    """Label the shown pair relevant by keyboard and submit; the page counts it."""
    page.wait_for_load_state("load")
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(page.locator("#progress-text")).to_have_text(progress_after)


def test_a_studys_first_week(browser, web, platform, slow_judge, wtb_slice):
    with signed_in_tab(browser, web, "curator") as staff:
        # Monday: the collection, two runs.
        staff.goto("/dashboard/")
        staff.select_option("#upload-kind", "beir")
        staff.set_input_files("#upload-file", str(wtb_slice))
        staff.fill("#upload-name", "wtb-week")
        staff.get_by_role("button", name="Upload").click()
        upload_row = staff.locator("tr.job", has_text="wtb-week.zip")
        expect(upload_row.locator(".job-status")).to_have_text("succeeded", timeout=WAIT_SECONDS * 1000)

        bm25 = start_run(staff, "bm25")
        dense = start_run(staff, "dense")
        for run_id in (bm25, dense):
            job = wait_for_job(platform["database"], run_job(platform, run_id))
            assert job["status"] == "succeeded", (job, worker_log(platform))
        staff.goto("/dashboard/")
        for run_id, retriever in ((bm25, "bm25"), (dense, "dense default")):  # the bundled all-MiniLM-L6-v2
            expect(staff.locator(f"#runs tr[data-run='{run_id}'] td").nth(2)).to_contain_text(retriever)
            expect(staff.locator(f"#runs tr[data-run='{run_id}'] td").nth(4)).to_have_text("done")

        # Tuesday: the study, over both runs' top DEPTH.
        staff.goto("/studies/new/relevance/")
        staff.get_by_label("Name", exact=True).fill("first week")
        staff.get_by_label("Collection").select_option(label="wtb-week")
        for run_id in (bm25, dense):
            staff.locator(f"input[name=runs][value='{run_id}']").check()
        staff.get_by_label("Top k of each run").fill(str(DEPTH))
        staff.get_by_label("Judgments per item").fill(str(JUDGMENTS_PER_ITEM))
        staff.get_by_role("button", name="Create study").click()
        expect(staff.locator("ul.messages")).to_contain_text("Study “first week” created with")
        study_id = int(urlparse(staff.url).path.strip("/").split("/")[-1])
        items = rows(platform, "SELECT count(*) AS n FROM annotation_item WHERE study_id = ?", study_id)[0]["n"]
        needed = items * JUDGMENTS_PER_ITEM
        assert items > LAB_JUDGED, items

        # Recruiting: a cap for the lab, an invitation, a crowd link with a quota.
        staff.goto(f"/studies/{study_id}/recruiting/")
        staff.get_by_label("Cap per annotator").fill(str(CAP))
        staff.locator("#annotators-form").get_by_role("button", name="Save").click()
        staff.locator("#invitations").get_by_role("button", name="Invite").click()
        invitation = urlparse(staff.locator("#new-invitation-url").inner_text()).path
        crowd = staff.locator("#crowd")
        crowd.get_by_label("Completion code").fill("CC-WEEK")
        crowd.get_by_label("Quota").fill(str(QUOTA))
        crowd.get_by_role("button", name="Create the crowd link").click()
        expect(staff.locator("#quota-summary")).to_contain_text(f"Each participant judges at most {QUOTA} items")
        crowd_path = urlparse(staff.locator("#crowd-link-url").inner_text()).path
        expect(staff.locator("#access-summary")).to_have_text(OPEN_TO_EVERYONE)

        # Wednesday: the judge starts on the study page, and a BM25 run is started meanwhile.
        staff.goto(f"/studies/{study_id}/")
        staff.locator("#judges").get_by_label("Judge").select_option(slow_judge)
        staff.locator("#judges").get_by_role("button", name="Start judging").click()
        judge_job = int(staff.locator("#judges .judging li").get_attribute("data-job"))
        late_bm25 = start_run(staff, "bm25")
        late_job = run_job(platform, late_bm25)

        with ExitStack() as people:
            lab = {name: people.enter_context(signed_in_tab(browser, web, name)) for name in ("lab1", "lab2")}
            crowd = [people.enter_context(crowd_tab(browser, web, crowd_path, CROWD[0]))]
            scholar = people.enter_context(fresh_tab(browser, web))
            for tab in lab.values():
                tab.goto(f"/annotate/{study_id}/")
                expect(tab.locator("#progress-text")).to_have_text(f"0 / {CAP}")
            expect(crowd[0].locator("#progress-text")).to_have_text(f"0 / {QUOTA}")

            # The first judgments land before the scholar accepts the invitation.
            judge(lab["lab1"], f"1 / {CAP}")
            judge(crowd[0], f"1 / {QUOTA}")
            judge(lab["lab2"], f"1 / {CAP}")

            assert rows(platform, "SELECT status FROM retrieval_job WHERE id = ?", judge_job)[0]["status"] == "running"

            scholar.goto(invitation)
            scholar.fill("#id_username", "scholar")
            scholar.fill("#id_password1", "a-long-Passphrase-42")
            scholar.fill("#id_password2", "a-long-Passphrase-42")
            scholar.get_by_role("button", name="Create my account").click()
            scholar.wait_for_url(f"{web}/")
            scholar.get_by_role("link", name="Start").click()
            expect(scholar.locator("#progress-text")).to_have_text(f"0 / {CAP}")

            # Everyone goes on at once, a second participant arriving after the acceptance.
            crowd.append(people.enter_context(crowd_tab(browser, web, crowd_path, CROWD[1])))
            expect(crowd[1].locator("#progress-text")).to_have_text(f"0 / {QUOTA}")
            judge(crowd[1], f"1 / {QUOTA}")
            annotators = {**lab, "scholar": scholar}
            targets = {"lab1": LAB_JUDGED, "lab2": LAB_JUDGED, "scholar": SCHOLAR_JUDGED}
            done = {"lab1": 1, "lab2": 1, "scholar": 0}
            for turn in range(LAB_JUDGED):
                for name, tab in annotators.items():
                    if done[name] < targets[name]:
                        done[name] += 1
                        judge(tab, f"{done[name]} / {CAP}")
                if turn == 0:
                    for tab in crowd:
                        finish_quota(tab)
            assert done == targets

            # Nobody was locked out: the lab goes on past the crowd's quota, up to its own cap.
            for tab in lab.values():
                tab.goto(f"/annotate/{study_id}/")
                expect(tab.locator("#progress-text")).to_have_text(f"{LAB_JUDGED} / {CAP}")
            scholar.goto(f"/annotate/{study_id}/")
            expect(scholar.locator("#progress-text")).to_have_text(f"{SCHOLAR_JUDGED} / {CAP}")

        # The BM25 run started during the judging was not held back by the judge on "long".
        late = wait_for_job(platform["database"], late_job)
        assert late["status"] == "succeeded", (late, worker_log(platform))
        judged = wait_for_job(platform["database"], judge_job)
        assert judged["status"] == "succeeded", (judged, worker_log(platform))
        bm25_seconds = seconds_between(late["created_at"], late["finished_at"])
        judge_seconds = seconds_between(judged["created_at"], judged["finished_at"])
        print(f"\nBM25 run started during the judging: {bm25_seconds:.1f} s; the judge: {judge_seconds:.1f} s")
        assert late["finished_at"] < judged["finished_at"], (bm25_seconds, judge_seconds)

        # Thursday: every count on every staff page.
        judgments = rows(
            platform,
            "SELECT username, item_id FROM annotation_judgment JOIN auth_user ON auth_user.id = annotator_id"
            " JOIN annotation_item ON annotation_item.id = item_id WHERE annotation_item.study_id = ? AND NOT voided",
            study_id,
        )
        participants = sorted({row["username"] for row in judgments} - {"lab1", "lab2", "scholar"})
        assert len(participants) == len(CROWD) and all(name.startswith("Participant") for name in participants)
        expected = {"lab1": LAB_JUDGED, "lab2": LAB_JUDGED, "scholar": SCHOLAR_JUDGED}
        expected |= dict.fromkeys(participants, QUOTA)
        limits = {"lab1": CAP, "lab2": CAP, "scholar": CAP} | dict.fromkeys(participants, QUOTA)
        assert Counter(row["username"] for row in judgments) == expected
        per_item = Counter(row["item_id"] for row in judgments)
        complete = sum(1 for count in per_item.values() if count >= JUDGMENTS_PER_ITEM)
        open_count = items - complete

        staff.goto(f"/studies/{study_id}/")
        expect(staff.locator(".status-badge")).to_have_text("Open for annotation")
        facts = staff.locator("dl.facts").first
        expect(facts).to_contain_text(f"{items} ({complete} complete)")
        expect(facts.locator(".progress-text")).to_have_text(f"{len(judgments)} / {needed}")
        for name, count in expected.items():
            judged_open = {
                row["item_id"]
                for row in judgments
                if row["username"] == name and per_item[row["item_id"]] < JUDGMENTS_PER_ITEM
            }
            remaining = min(open_count - len(judged_open), limits[name] - count)  # what they may still judge
            cells = staff.locator(f"#annotators tr[data-annotator='{name}'] td")
            expect(cells.nth(1)).to_have_text(str(count))
            expect(cells.nth(2)).to_have_text(str(remaining))
        expect(staff.locator("#annotators tbody tr")).to_have_count(len(expected))
        judge_row = staff.locator("#judges table tbody tr", has_text=slow_judge)
        expect(judge_row.locator("td").nth(3)).to_have_text(str(items))
        expect(judge_row.locator("td").nth(5)).to_have_text(str(items))

        staff.goto(f"/studies/{study_id}/recruiting/")
        expect(staff.locator("#access-summary")).to_have_text(OPEN_TO_EVERYONE)
        expect(staff.locator("#quota-summary")).to_contain_text(f"Each participant judges at most {QUOTA} items")

        staff.goto(f"/studies/{study_id}/quality/")
        for name, count in expected.items():
            expect(staff.locator(f"tr[data-annotator='{name}'] td").nth(1)).to_have_text(str(count))

        # Friday: the report carries the humans and the judge.
        staff.goto(f"/studies/{study_id}/report/")
        for name, count in expected.items():
            row = staff.locator("section.card", has_text="Annotators").locator("tbody tr", has_text=name)
            expect(row.locator("td").nth(1)).to_have_text(str(count))
        judge_report = staff.locator("#judges tbody tr", has_text=slow_judge)
        expect(judge_report.locator("td").nth(2)).to_have_text(f"{items}/{items}")  # labelled / items
        body = staff.locator("body").inner_text()
        assert not any(pid in body for pid in CROWD)  # participants by name, never by Prolific id


def finish_quota(tab) -> None:
    """The participant's last judgment of their quota: the completion code, nothing more."""
    tab.wait_for_load_state("load")
    tab.keyboard.press("1")
    tab.keyboard.press("Enter")
    expect(tab.locator("#completion-code")).to_have_text("CC-WEEK")


@contextmanager
def fresh_tab(browser, base_url: str):
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(WAIT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()


@contextmanager
def crowd_tab(browser, base_url: str, crowd_path: str, pid: str):
    """A Prolific participant's browser, arriving at the crowd link."""
    with fresh_tab(browser, base_url) as tab:
        tab.goto(f"{crowd_path}?PROLIFIC_PID={pid}&STUDY_ID=prolific-week&SESSION_ID=session-{pid[-2:]}")
        yield tab


def seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
