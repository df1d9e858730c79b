"""A learning endpoint's safeguards measured on the embedded model (`serve --method ttrl`, the cpu preset, one
rollout step an update): the gate's false refusals over ordinary updates, an lr 0.5 update it must catch, one
client's flood with and without the per-client bound, and the memory and disk an update takes.

1. Ordinary: the 4 probe questions, then `--updates` windows of 4 arith questions (seed 1, the arith prompt), one
   client, each window sent once the previous update has finished (a burst would be bounded by the backlog, not
   learned from); each update's gate verdict (a refusal here is a false refusal: nothing was wrong with the update's
   recipe).
2. Wrecked: the same at `--method-opt lr=0.5` for two updates: each must be refused, and no reply name trained
   weights.
3. Flood: the probe's 4 arith questions, then a flooder (`user: "flooder"`) asking questions whose answer is 0
   (`a - a`), three to each ordinary question of another client, in groups of 4 sent once the updates settle; then
   the probe's questions again. With the bound (max_client_share 0.5, the default) and without (1.0): the
   flooder's share of what was learned from, the updates' outcomes, and how far the flood moved the weights: the
   share of the probe's samples answering 0 (the flooded answer) before and after.
Memory: the server process's peak resident set (psutil, every half second); disk: the largest the run's
`stream/` grew while updates ran.

    .venv/bin/python perf/serve_safe.py [--updates 10] [--model hf:smollm2-135m] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import openai
import psutil

from testtime.benchmarks.arith import Arith
from testtime.experiments.ttrl_miniature import REPORT_SET_SEED

sys.path.insert(0, str(Path(__file__).parent))
from serve_learns import serving  # a perf script beside this one

COMMON = ["--method", "ttrl", "--method-opt", "preset=cpu", "--method-opt", "update_every=4",
          "--method-opt", "window=4", "--method-opt", "update_steps=1", "--method-opt", "n_vote=8",
          "--method-opt", "n_train=4"]  # fmt: skip


class Watch:
    """The server's peak memory (it and its children) and its run's largest `stream/` on disk."""

    def __init__(self, out: Path) -> None:
        self.out, self.peak_rss, self.peak_disk = out, 0, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.stop.wait(0.5):
            for process in psutil.process_iter(["cmdline", "memory_info"]):
                if any(str(self.out) == part for part in process.info["cmdline"] or []):
                    self.peak_rss = max(self.peak_rss, process.info["memory_info"].rss)
            stream = self.out / "stream"
            if stream.exists():
                size = sum(p.stat().st_size for p in stream.rglob("*") if p.is_file())
                self.peak_disk = max(self.peak_disk, size)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def ask(url: str, model: str, traffic: list[tuple[list[dict[str, str]], str]]) -> None:
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=1800)
    for messages, user in traffic:
        client.chat.completions.create(model=model, messages=messages, user=user)  # type: ignore[arg-type]


def settle(url: str, timeout: float = 3600.0) -> dict[str, Any]:
    import httpx

    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        learning = httpx.get(url.removesuffix("/v1") + "/health", timeout=30).json()["learning"]
        if not learning["updating"] and not learning["due"]:
            return learning
        time.sleep(1.0)
    raise SystemExit("the updates did not finish")


def run(out: Path, model: str, groups: list[list[tuple[list[dict[str, str]], str]]], *options: str) -> dict[str, Any]:
    """One server on `out`: each group of requests sent once the updates the previous one made due have settled."""
    args = [*COMMON, *(x for o in options for x in ("--method-opt", o)), "--model", model]
    with serving(out, *args) as url:
        watch = Watch(out)
        for traffic in groups:
            ask(url, model, traffic)
            learning = settle(url)
        watch.close()
    recorded = out / "stream" / "updates.jsonl"
    updates = [json.loads(line) for line in recorded.read_text().splitlines()] if recorded.exists() else []
    requests = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    answered = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    answered.sort(key=lambda r: r["answered_with"]["arrival"])
    return {"updates": updates, "requests": requests, "answered": answered, "learning": learning,
            "rss": watch.peak_rss, "disk": watch.peak_disk}  # fmt: skip


def share_of(answered: list[dict[str, Any]], answer: str) -> float:
    samples = [c["answer"] for r in answered for c in r["candidates"]]
    return sum(a == answer for a in samples) / len(samples) if samples else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument("--model", default="hf:smollm2-135m", help="a model spec, or an hf model folder")
    parser.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    parser.add_argument("--smoke", action="store_true", help="two updates, the wrecked and flood parts at one each")
    args = parser.parse_args()
    if Path(args.model).is_dir():
        args.model = f"hf:{args.model}"
    arith = Arith(seed=REPORT_SET_SEED, size=64)
    problems, _ = arith.load()
    prompt = [[m.model_dump() for m in arith.prompt(p)] for p in problems]
    updates = 2 if args.smoke else args.updates
    ordinary = [(prompt[i % len(prompt)], "someone") for i in range(4 + 4 * updates)]
    windows = [ordinary[:4]] + [ordinary[i : i + 4] for i in range(4, len(ordinary), 4)]
    # the flooder's questions all have the answer 0: a pull toward one answer, if it were learned from unbounded
    flooded = [[{"role": "user", "content": f"What is {a} - {a}? Put the final answer in \\boxed{{}}."}]
               for a in range(11, 75)]  # fmt: skip
    probe = [(prompt[-1 - i], "someone") for i in range(4)]  # questions neither the flood nor the windows ask
    flood = [(prompt[i], "someone") if i % 4 == 0 else (flooded[i], "flooder") for i in range(12 if args.smoke else 32)]
    flood_groups = [probe] + [flood[i : i + 4] for i in range(0, len(flood), 4)] + [probe]
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.out or Path(scratch)
        for name in ("ordinary", "wrecked", "flood-0.5", "flood-1.0"):
            shutil.rmtree(folder / name, ignore_errors=True)
        base = run(folder / "ordinary", args.model, windows)
        gated = [u for u in base["updates"] if u.get("gate")]
        refused = [u for u in gated if u["outcome"] == "refused"]
        zs = [(u["gate"].get("answer_rate_z"), u["gate"].get("loop_rate_z")) for u in gated]
        print(f"ordinary: {len(base['updates'])} updates, {len(gated)} gated, {len(refused)} refused by the gate "
              f"({[u['why'] for u in refused]}); (answer-rate z, loop-rate z) {zs}; peak memory "
              f"{base['rss'] / 2**30:.2f} GiB, stream/ at most {base['disk'] / 2**30:.2f} GiB")  # fmt: skip
        wrecked = run(folder / "wrecked", args.model, windows[: 2 if args.smoke else 3], "lr=0.5")
        outcomes = [u["outcome"] for u in wrecked["updates"]]
        names = {r["weights"] for r in wrecked["requests"]}
        rates = [(u["gate"]["serving"]["answer_rate"], u["gate"]["trained"]["answer_rate"],
                  u["gate"]["serving"].get("loop_rate"), u["gate"]["trained"].get("loop_rate"), u["gate"]["why"])
                 for u in wrecked["updates"] if u.get("gate")]  # fmt: skip
        print(f"lr 0.5: updates {outcomes}; replies named {sorted(names)}; answer rate serving, trained; samples "
              f"that loop serving, trained; why: {rates}")  # fmt: skip
        for share in ("0.5", "1.0"):
            flooded_run = run(folder / f"flood-{share}", args.model, flood_groups, f"max_client_share={share}")
            learned = [r for r in flooded_run["requests"] if r["learned"]]
            mine = sum(r["client"] == "user:flooder" for r in learned)
            answered = flooded_run["answered"]
            before, after = share_of(answered[:4], "0"), share_of(answered[-4:], "0")
            outcomes = [u["outcome"] for u in flooded_run["updates"]]
            weights = flooded_run["requests"][-1]["weights"]
            print(
                f"flood, max_client_share {share}: the flooder brought {mine} of the {len(learned)} requests learned "
                f"from; updates {outcomes}; the probe's samples answering 0 (the flooded answer): {before:.3f} "
                f"before, {after:.3f} after (answered by {weights})"
            )


if __name__ == "__main__":
    main()
