"""Starting and stopping the real webhook receiver process (webhook_receiver.py) for tests."""

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

from jobs.management.commands.run_platform import free_port, stop_process

SCRIPT = Path(__file__).with_name("webhook_receiver.py")


class Receiver:
    """A receiver process on a fixed port: stop it and start it again at the same address."""

    def __init__(self, folder: Path, secret: str, *, fail_first: int = 0):
        self.port, self.secret, self.fail_first = free_port(), secret, fail_first
        self.log = folder / f"receiver-{self.port}.jsonl"
        self.process = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> "Receiver":
        command = [sys.executable, str(SCRIPT), str(self.port), self.secret, str(self.log)]
        self.process = subprocess.Popen([*command, "--fail-first", str(self.fail_first)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"the receiver did not start on port {self.port}")

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None

    def requests(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def wait_for(self, count: int, seconds: float = 60) -> list[dict]:
        deadline = time.monotonic() + seconds
        while len(self.requests()) < count and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.requests()
