"""client/README.md's example, run as written against the live demo: the platform as
`./scripts/run.sh` leaves it (seed_demo with the default demo passwords, a real web server and a
Celery worker with Redis). Only the server's address is swapped for the test server's, since
the test cannot take port 8000."""

import json
import re

import pandas as pd
import pytest

from tests.client.conftest import CLIENT_FOLDER
from tests.live_platform import manage

pytestmark = pytest.mark.redis

README_SERVER = '"http://127.0.0.1:8000"'


@pytest.fixture(scope="module")
def platform(platform):
    """The demo as run.sh seeds it: no MARGINALIA_DEMO_PASSWORD, so the README's passwords."""
    platform["env"].pop("MARGINALIA_DEMO_PASSWORD", None)
    manage(platform, "seed_demo", "--json")
    return platform


def readme_example() -> str:
    text = (CLIENT_FOLDER / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert len(blocks) == 1, "the README has one Python example"
    assert README_SERVER in blocks[0]
    return blocks[0]


def test_the_readme_example_runs_against_the_demo_and_ends_on_a_kappa(web_server):
    namespace: dict = {}
    exec(readme_example().replace(README_SERVER, json.dumps(web_server)), namespace)

    study, report, staff = namespace["study"], namespace["report"], namespace["staff"]
    assert study["items"] == 10
    assert report["judgments"] == 2 * study["items"]
    assert report["fleiss_kappa"] is not None and -1.0 <= report["fleiss_kappa"] <= 1.0
    assert 0.0 <= report["majority_accuracy"] <= 1.0
    judgments = staff.judgments(study["id"])
    assert isinstance(judgments, pd.DataFrame) and set(judgments["annotator"]) == {"annotator1", "annotator2"}
    assert "demo-salt-ledger" in set(staff.collections()["name"])
