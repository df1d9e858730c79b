"""A learning endpoint's safeguards measured on the embedded model (`serve --method ttrl`, the cpu preset, one
rollout step an update): the gate's false refusals over ordinary updates, an lr 0.5 update it must catch, one
client's flood with and without the per-client bound, and the memory and disk an update takes.

1. Ordinary: `--updates` updates' worth of arith questions (seed 1, the arith prompt), one client, one at a time;
   each update's gate verdict (a refusal here is a false refusal: nothing was wrong with the update's recipe).
2. Wrecked: the same at `--method-opt lr=0.5` for two updates: each must be refused, and no reply name trained
   weights.
3. Flood: a flooder (`user: "flooder"`) asks questions whose answer is 0 (`a - a`), interleaved with another
   client's ordinary ones, three flooded questions to one ordinary; with the bound (max_client_share 0.5, the
   default) and without (1.0): the flooder's share of what was learned from, the updates' outcomes, and the
   probe's vote share under the serving and the trained weights at the last gate.
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


def run(out: Path, model: str, traffic: list[tuple[list[dict[str, str]], str]], *options: str) -> dict[str, Any]:
    args = [*COMMON, *(x for o in options for x in ("--method-opt", o)), "--model", model]
    with serving(out, *args) as url:
        watch = Watch(out)
        ask(url, model, traffic)
        learning = settle(url)
        watch.close()
    recorded = out / "stream" / "updates.jsonl"
    updates = [json.loads(line) for line in recorded.read_text().splitlines()] if recorded.exists() else []
    requests = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    return {"updates": updates, "requests": requests, "learning": learning, "rss": watch.peak_rss,
            "disk": watch.peak_disk}  # fmt: skip


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
    # the flooder's questions all have the answer 0: a pull toward one answer, if it were learned from unbounded
    flooded = [[{"role": "user", "content": f"What is {a} - {a}? Put the final answer in \\boxed{{}}."}]
               for a in range(11, 75)]  # fmt: skip
    flood = []
    for i in range(12 if args.smoke else 32):
        flood.append((prompt[i], "someone") if i % 4 == 0 else (flooded[i], "flooder"))
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.out or Path(scratch)
        shutil.rmtree(folder / "ordinary", ignore_errors=True)
        base = run(folder / "ordinary", args.model, ordinary)
        gated = [u for u in base["updates"] if u.get("gate")]
        refused = [u for u in gated if u["outcome"] == "refused"]
        print(f"ordinary: {len(base['updates'])} updates, {len(refused)} refused by the gate "
              f"({[u['why'] for u in refused]}); peak memory {base['rss'] / 2**30:.2f} GiB, stream/ at most "
              f"{base['disk'] / 2**30:.2f} GiB")  # fmt: skip
        wrecked = run(folder / "wrecked", args.model, ordinary[: 4 + 4 * (1 if args.smoke else 2)], "lr=0.5")
        outcomes = [u["outcome"] for u in wrecked["updates"]]
        names = {r["weights"] for r in wrecked["requests"]}
        rates = [(u["gate"]["serving"]["answer_rate"], u["gate"]["trained"]["answer_rate"])
                 for u in wrecked["updates"] if u.get("gate")]  # fmt: skip
        print(f"lr 0.5: updates {outcomes}; replies named {sorted(names)}; answer rate serving -> trained {rates}")
        for share in ("0.5", "1.0"):
            flooded_run = run(folder / f"flood-{share}", args.model, flood, f"max_client_share={share}")
            learned = [r for r in flooded_run["requests"] if r["learned"]]
            mine = sum(r["client"] == "user:flooder" for r in learned)
            last = next((u["gate"] for u in reversed(flooded_run["updates"]) if u.get("gate")), None)
            shares = (last["serving"]["vote_share"], last["trained"]["vote_share"]) if last else None
            outcomes = [u["outcome"] for u in flooded_run["updates"]]
            print(
                f"flood, max_client_share {share}: the flooder brought {mine} of the {len(learned)} requests learned "
                f"from; updates {outcomes}; the probe's vote share serving -> trained at the last gate {shares}"
            )


if __name__ == "__main__":
    main()
