"""A real webhook receiver for the tests, run as its own process:

    python webhook_receiver.py PORT SECRET LOG [--fail-first N]

Every POST is checked the way a receiver should check it (HMAC-SHA256 of `timestamp.body` under
SECRET, compared in constant time) and appended to LOG as one JSON line: the headers, the body,
whether the signature verified and the status answered. The first N requests get a 500."""

import argparse
import hashlib
import hmac
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("secret")
    parser.add_argument("log")
    parser.add_argument("--fail-first", type=int, default=0)
    options = parser.parse_args()
    seen = {"count": 0}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            timestamp = self.headers.get("X-Marginalia-Timestamp", "")
            expected = hmac.new(options.secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
            verified = hmac.compare_digest(f"sha256={expected}", self.headers.get("X-Marginalia-Signature", ""))
            seen["count"] += 1
            status = 500 if seen["count"] <= options.fail_first else 200 if verified else 401
            record = {"headers": dict(self.headers), "body": json.loads(body), "verified": verified, "status": status}
            with open(options.log, "a") as log:
                log.write(json.dumps(record) + "\n")
            self.send_response(status)
            self.end_headers()

        def log_message(self, *args):
            pass

    ThreadingHTTPServer(("127.0.0.1", options.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
