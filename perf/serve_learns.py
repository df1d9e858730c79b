"""`testtime serve --method ttrl` measured: what a client waits while the endpoint trains, and what learning from
its own requests gains over an endpoint that does not learn, on the same request sequence.

Two servers (processes of their own) on the embedded model answer the same arith questions (a held-out set: the
cpu preset was tuned on seed 0, these are seed 1), each sent as the arith prompt (its two worked examples, then
the question) by the openai SDK, one at a time, a new one every `--interval` seconds (traffic, not a flood: an
update takes minutes on 2 cores). The first learns (`--method ttrl --method-opt preset=cpu --method-opt
update_every=B`); the second is `--method majority` at the same sampling (the preset's 8 evaluation samples at
T=1.0, top-p 1.0, 32 new tokens), which is how the learning server answers before its first update. While the
learning server runs, a thread reads `/health` every half second. Each request's latency is counted "during an
update" when `/health` said an update was training just before it was sent or just after it was answered. Then
both runs are graded (`testtime grade --run --bench arith`) and reported (`testtime report`): prequential
accuracy, and the paired difference over the same questions with its bootstrap interval.

    .venv/bin/python perf/serve_learns.py [--requests 48] [--interval 6] [--update-every 8] [--format-hint]
                                          [--out DIR] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai

from testtime.benchmarks.arith import Arith
from testtime.experiments.ttrl_miniature import REPORT_SET_SEED
from testtime.methods.ttrl.recipe import PRESETS


@contextmanager
def serving(out: Path, *args: str) -> Iterator[str]:
    """`testtime serve` on a free port until the block ends (then SIGTERM, and its summary written)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "testtime.cli", "serve", "--port", "0", "--out", str(out), "--quiet", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise SystemExit(f"serve did not start: {process.stderr.read()[-2000:]}")
    try:
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=300)
        if process.returncode != 0:
            raise SystemExit(f"serve exited {process.returncode}: {err[-2000:]}")


class HealthWatch:
    """Reads `/health` every half second: how long it took, and whether an update was training."""

    def __init__(self, url: str) -> None:
        self.url = url.removesuffix("/v1") + "/health"
        self.samples: list[tuple[float, bool]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def updating(self) -> bool:
        return bool(httpx.get(self.url, timeout=30).json()["learning"]["updating"])

    def _watch(self) -> None:
        while not self.stop.wait(0.5):
            started = time.perf_counter()
            body = httpx.get(self.url, timeout=30).json()
            self.samples.append((time.perf_counter() - started, bool(body["learning"]["updating"])))

    def settle(self, timeout: float = 900.0) -> None:
        """Wait for the updates the requests made due (the last ones answered no request, but are counted)."""
        deadline = time.perf_counter() + timeout
        while self.updating() and time.perf_counter() < deadline:
            time.sleep(0.5)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def ask(
    url: str, model: str, problems: list[Any], arith: Arith, interval: float, health: HealthWatch | None
) -> list[dict[str, Any]]:
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=1800)
    asked = []
    for problem in problems:
        due = time.perf_counter() + interval
        before = health.updating() if health else False
        started = time.perf_counter()
        reply = client.chat.completions.create(model=model, messages=[m.model_dump() for m in arith.prompt(problem)])
        latency = time.perf_counter() - started
        after = health.updating() if health else False
        asked.append({"latency": latency, "during_update": before or after, "model": reply.model})
        time.sleep(max(0.0, due - time.perf_counter()))
    return asked


def testtime(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "testtime.cli", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"testtime {args[0]}: {done.stderr[-2000:]}")


def quantiles(values: list[float]) -> str:
    if not values:
        return "- (none)"
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return f"{statistics.median(values):.2f} / {p90:.2f} / {values[-1]:.2f} s ({len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--interval", type=float, default=6.0, help="seconds between the starts of two requests")
    parser.add_argument("--update-every", type=int, default=8)
    parser.add_argument(
        "--format-hint",
        action="store_true",
        help="let the servers add their boxed-answer instruction (default: the arith prompt as it is, its two "
        "worked examples showing the box: the miniature's prompt)",
    )
    parser.add_argument("--model", type=Path, default=None, help="a transformers folder (default: the embedded)")
    parser.add_argument("--out", type=Path, default=None, help="where the runs go (default: a temporary folder)")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.requests, args.interval, args.update_every = 8, 0.0, 2  # 4 held out for the gate, 2 updates
    size = max(args.requests, 1)
    arith = Arith(digits=2, size=size, seed=REPORT_SET_SEED)
    problems, _ = arith.load()
    model = f"hf:{args.model}" if args.model else "hf:smollm2-135m"
    cpu = PRESETS["cpu"]
    learning = ["--method", "ttrl", "--method-opt", "preset=cpu", "--method-opt", f"update_every={args.update_every}"]
    if args.smoke:  # one rollout step of the two requests an update learns from
        learning += ["--method-opt", "update_steps=1", "--method-opt", "prompts_per_step=2"]
    sampling = ["--n", str(cpu["eval_samples"]), "--temperature", str(cpu["eval_temperature"]),
                "--top-p", str(cpu["eval_top_p"]), "--max-tokens", str(cpu["max_response"])]  # fmt: skip
    hint = [] if args.format_hint else ["--no-format-hint"]
    labels = ["--bench", "arith", "--bench-opt", f"seed={REPORT_SET_SEED}", "--bench-opt", f"size={size}"]
    with tempfile.TemporaryDirectory(prefix="serve-learns-") as scratch:
        out = args.out or Path(scratch)
        started = time.perf_counter()
        with serving(out / "ttrl", "--model", model, *hint, *learning) as url:
            health = HealthWatch(url)
            learned = ask(url, model, problems, arith, args.interval, health)
            health.settle()
            health.close()
        learning_s = time.perf_counter() - started
        majority = ["--method", "majority", "--domain", "math", *hint, *sampling]
        with serving(out / "majority", "--model", model, *majority) as url:
            plain = ask(url, model, problems, arith, 0.0, None)
        for run in ("ttrl", "majority"):
            testtime("grade", "--run", str(out / run), *labels)
        testtime("report", str(out / "ttrl"), str(out / "majority"), "--out", str(out / "report"))
        report = json.loads((out / "report" / "report.json").read_text())
        updates = len((out / "ttrl" / "stream" / "updates.jsonl").read_text().splitlines())
    row = next(r for r in report["runs"] if r["method"] == "ttrl")
    base = row["majority_same_rollouts"]
    stream = row["prequential"]
    acc, d = stream["accuracy"], base.get("difference")
    idle = [a["latency"] for a in learned if not a["during_update"]]
    busy = [a["latency"] for a in learned if a["during_update"]]
    watch_idle = [s for s, updating in health.samples if not updating]
    watch_busy = [s for s, updating in health.samples if updating]
    prompt = "with the servers' boxed-answer instruction" if args.format_hint else "as it is"
    print(f"{args.requests} arith requests (seed {REPORT_SET_SEED}, the arith prompt {prompt}), one every "
          f"{args.interval:g} s; {model}")  # fmt: skip
    print("| | median / p90 / max (n) |")
    print("|---|---|")
    print(f"| learning server, no update training | {quantiles(idle)} |")
    print(f"| learning server, an update training | {quantiles(busy)} |")
    print(f"| majority server (does not learn) | {quantiles([a['latency'] for a in plain])} |")
    print(f"| /health, no update training | {quantiles(watch_idle)} |")
    print(f"| /health, an update training | {quantiles(watch_busy)} |")
    print()
    weights = sorted({a["model"] for a in learned}, key=lambda m: int(m.rpartition("@")[2]) if "@" in m else -1)
    print(f"updates: {updates} in {learning_s:.0f} s; replies named {', '.join(weights)}")
    windows = " / ".join("-" if w["accuracy"] is None else f"{w['accuracy']['mean']:.2f}" for w in stream["windows"])
    print(f"prequential accuracy, learning: {acc['mean']:.3f} [{acc['ci_low']:.3f}, {acc['ci_high']:.3f}] "
          f"(by window: {windows})")  # fmt: skip
    print(f"majority at k={base.get('k')}: {base.get('accuracy')} ({base.get('none') or base.get('interval')})")
    if d:
        print(f"learning − majority, paired by question: {d['mean']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]")
    if args.out:
        print(f"runs: {args.out}")


if __name__ == "__main__":
    main()
