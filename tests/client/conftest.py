"""The client is its own package (client/, not installed into the project's environment): the
tests import it from its folder, as `pip install ./client` would."""

import sys
from pathlib import Path

CLIENT_FOLDER = Path(__file__).resolve().parents[2] / "client"
sys.path.insert(0, str(CLIENT_FOLDER))
