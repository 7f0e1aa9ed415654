"""A real OpenAI-compatible HTTP server for the judge tests, run as its own process:

    python -m tests.judges.openai_server --port P --log FILE [--answer TEXT | --model]
        [--rate-limit N --retry-after S] [--fail-5xx N] [--delay S] [--keyword W --keyword-answer TEXT]
        [--answers-by-seed TEXT|TEXT|...]
        [--status CODE --body TEXT [--location URL]]

POST /v1/chat/completions answers with `--answer` (a deterministic responder for fault cases;
with `--answers-by-seed`, the text the request's seed picks: a judge whose samples disagree
as scripted)
or, with `--model`, with the embedded SmolLM2 GGUF generating for real (the same model the local
judge loads). The first N requests can be refused with 429 + Retry-After or 500; with --status,
every request gets that status and --body as a plain-text body (and --location as Location: a
redirect), the way an internal service that is no chat endpoint would answer. Every request is
logged as one JSON line (status, the prompt's hash, time, the Authorization and Host headers it
came with), so tests can tell which prompts were asked, when, and with which key.
`transformers serve` would be the off-the-shelf choice, but it needs
fastapi/uvicorn (not pinned here) and loads Hub models, not the GGUF inside a package.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--answer", default="ANSWER: 1")
    parser.add_argument("--model", action="store_true")
    parser.add_argument("--keyword", default="", help="Answer --keyword-answer when the prompt holds this word.")
    parser.add_argument("--keyword-answer", default="SCORE: 9")
    parser.add_argument(
        "--answers-by-seed", default="", help="TEXT|TEXT|...: the request with seed s gets the (s mod n)-th text."
    )
    parser.add_argument("--rate-limit", type=int, default=0)
    parser.add_argument("--retry-after", default="1")
    parser.add_argument("--fail-5xx", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--status", type=int, default=0, help="Answer every request with this status.")
    parser.add_argument("--body", default="", help="The body answered with --status (text/plain).")
    parser.add_argument("--location", default="", help="A Location header for --status (a redirect).")
    options = parser.parse_args()
    lock = threading.Lock()
    seen = {"requests": 0}
    generate = _model_generator() if options.model else None

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            prompt = json.dumps(body.get("messages"), sort_keys=True)
            with lock:
                seen["requests"] += 1
                number = seen["requests"]
            if options.status:
                headers = {"Location": options.location} if options.location else {}
                return self._send(options.status, options.body, prompt, headers)
            if not self.path.endswith("/chat/completions"):
                return self._send(404, {"error": {"message": "not found"}}, prompt)
            if number <= options.rate_limit:
                return self._send(
                    429, {"error": {"message": "slow down"}}, prompt, {"Retry-After": options.retry_after}
                )
            if number <= options.rate_limit + options.fail_5xx:
                return self._send(500, {"error": {"message": "overloaded"}}, prompt)
            time.sleep(options.delay)
            if generate is not None:
                text, prompt_tokens, completion_tokens = generate(body)
            else:
                matched = options.keyword and options.keyword in prompt
                by_seed = options.answers_by_seed.split("|") if options.answers_by_seed else []
                if matched:
                    text = options.keyword_answer
                elif by_seed:
                    text = by_seed[int(body.get("seed") or 0) % len(by_seed)]
                else:
                    text = options.answer
                prompt_tokens, completion_tokens = len(prompt.split()), 2
            return self._send(
                200,
                {
                    "id": f"chatcmpl-{number}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "test"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens,
                    },
                },
                prompt,
            )

        def _send(self, status, payload, prompt, headers=None):
            # Logged before answering, so a test that has its answer finds the line in the log.
            entry = {
                "status": status,
                "prompt": hashlib.sha256(prompt.encode()).hexdigest(),
                "time": time.time(),
                "authorization": self.headers.get("Authorization"),
                "host": self.headers.get("Host"),
            }
            with lock, open(options.log, "a") as log:
                log.write(json.dumps(entry) + "\n")
            text = isinstance(payload, str)
            data = payload.encode() if text else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain" if text else "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", options.port), Handler)
    print("ready", flush=True)
    server.serve_forever()


def _model_generator():
    """Chat completions from the embedded GGUF, loaded once, as the local judge loads it."""
    import os

    import django
    import torch

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "marginalia.settings")
    django.setup()
    from judges.backends import EMBEDDED_GGUF, embedded_model_folder, load_local_model

    model, tokenizer, device = load_local_model(embedded_model_folder(), EMBEDDED_GGUF)
    lock = threading.Lock()

    def generate(body: dict) -> tuple[str, int, int]:
        inputs = tokenizer.apply_chat_template(
            body["messages"], add_generation_prompt=True, return_tensors="pt", return_dict=True
        ).to(device)
        with lock, torch.inference_mode():
            output = model.generate(
                **inputs,
                max_new_tokens=int(body.get("max_tokens") or 8),
                do_sample=False,
                pad_token_id=tokenizer.eos_token_id,
            )
        length = inputs["input_ids"].shape[1]
        generated = output[0][length:]
        return tokenizer.decode(generated, skip_special_tokens=True), int(length), int(generated.shape[0])

    return generate


if __name__ == "__main__":
    main()
