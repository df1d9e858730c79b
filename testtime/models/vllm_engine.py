"""`vllm:` — vLLM for fast local rollouts: `vllm:<model folder or hub id>`, or the embedded `vllm:smollm2-135m`.

Where vLLM is importable in this interpreter (a GPU box with `pip install 'testtime[vllm]'`), its offline
engine runs in-process, requests micro-batched like the `hf:` backend, each row with its own seed. Otherwise
the backend starts `vllm serve` from the vLLM environment (`scripts/install --vllm`; see `vllm_server`) on
first use and speaks to it through the `openai:` client; the server stops with the run.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from testtime.core.errors import UserError
from testtime.core.model import BatchCounts, LanguageModel
from testtime.core.records import Completion, Message, SamplingParams, TokenStats, Usage
from testtime.models import MODELS
from testtime.models.batching import BatchRow, MicroBatcher
from testtime.models.confidence import top_stats
from testtime.models.openai_api import OpenAIModel
from testtime.models.vllm_server import CPU_DEFAULTS, INSTALL_HINT, VLLMServer, vllm_python


class VLLMModel(LanguageModel):
    """vLLM's offline engine in this process."""

    token_stats = "top-k"

    def __init__(self, path: str, *, name: str, max_batch: int = 256, engine_args: dict[str, Any] | None = None):
        self.name = name
        self.path = path
        self.engine_args = engine_args or {}
        self._llm: Any = None
        # vLLM takes per-request sampling settings, so every request can share one batch.
        self._batcher = MicroBatcher(self._run_batch, max_batch, lambda params: None)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "engine_args": self.engine_args}

    async def generate(self, messages: Sequence[Message], n: int, params: SamplingParams) -> list[Completion]:
        return await self._batcher.submit(messages, n, params)

    def batch_counts(self) -> BatchCounts:
        return self._batcher.counts

    def _engine(self) -> Any:
        if self._llm is None:
            import torch
            from vllm import LLM

            arguments = dict(self.engine_args)
            if not torch.cuda.is_available():  # the CPU build: no CUDA graphs, a fixed KV cache size
                for key, value in CPU_DEFAULTS.items():
                    os.environ.setdefault(key, value)
                arguments.setdefault("enforce_eager", True)
            self._llm = LLM(model=self.path, **arguments)
        return self._llm

    def _run_batch(self, rows: list[BatchRow]) -> list[list[Completion]]:
        from vllm import SamplingParams as VSampling

        llm = self._engine()
        tokenizer = llm.get_tokenizer()
        prompts = [
            tokenizer.apply_chat_template(
                [m.model_dump() for m in row.messages], tokenize=False, add_generation_prompt=True
            )
            for row in rows
        ]
        sampling = [
            VSampling(
                n=row.n,
                temperature=row.params.temperature,
                top_p=row.params.top_p,
                max_tokens=row.params.max_tokens,
                seed=row.params.seed,
                stop=list(row.params.stop) or None,
                logprobs=row.params.logprobs,
            )
            for row in rows
        ]
        started = time.perf_counter()
        outputs = llm.generate(prompts, sampling, use_tqdm=False)
        # Each sample is charged its share of the batch's wall time, as the hf: backend does.
        latency = (time.perf_counter() - started) / max(1, sum(row.n for row in rows))
        return [
            [
                Completion(
                    text=o.text,
                    finish_reason="length" if o.finish_reason == "length" else "stop",
                    usage=Usage(prompt_tokens=len(out.prompt_token_ids), completion_tokens=len(o.token_ids)),
                    latency_s=latency,
                    cost_usd=0.0,
                    token_stats=None if row.params.logprobs is None else engine_token_stats(o, row.params.logprobs),
                )
                for o in out.outputs
            ]
            for row, out in zip(rows, outputs, strict=True)
        ]


def engine_token_stats(output: Any, k: int) -> TokenStats | None:
    """A vLLM sample's statistics from its `logprobs` (per position, token id → Logprob, the chosen token's
    among the k likeliest). vLLM reports the raw model's log-probs (before temperature and top-p)."""
    positions = getattr(output, "logprobs", None)
    if positions is None or len(positions) != len(output.token_ids):
        return None
    chosen, alternatives = [], []
    for token, alternatives_here in zip(output.token_ids, positions, strict=True):
        chosen.append(float(alternatives_here[token].logprob))
        # the chosen token is always reported, ranked or not: only the k ranked ones are the alternatives
        ranked = sorted(alternatives_here.values(), key=lambda lp: lp.logprob, reverse=True)[:k]
        alternatives.append([float(lp.logprob) for lp in ranked])
    return top_stats(chosen, alternatives, k)


class VLLMServedModel(OpenAIModel):
    """`vllm serve` from the vLLM environment, started on first use, through the `openai:` client."""

    price = 0.0  # local compute

    def __init__(self, path: str, *, name: str, python: str, request_timeout_s: float = 600.0) -> None:
        self.server = VLLMServer(path, name.removeprefix("vllm:"), python=python)
        super().__init__(self.server.served_name, api_bases=[], request_timeout_s=request_timeout_s)
        self.name, self.path = name, path
        self._starting = asyncio.Lock()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "served_by": self.server.python}

    async def generate(self, messages: Sequence[Message], n: int, params: SamplingParams) -> list[Completion]:
        async with self._starting:
            if not self.fleet.servers:
                url = await asyncio.to_thread(self.server.start)
                self.add_server(url)
        return await super().generate(messages, n, params)

    async def aclose(self) -> None:
        await super().aclose()
        self.server.stop()


@MODELS.register("vllm", help=f"vLLM: vllm:<model folder> or the embedded vllm:smollm2-135m ({INSTALL_HINT})")
def build_vllm(rest: str, *, max_batch: int = 256, request_timeout_s: float = 600.0, **_: Any) -> LanguageModel:
    from testtime.models.hf import EMBEDDED, embedded_model_dir

    if not rest:
        raise UserError("vllm: needs a model folder or hub id, e.g. vllm:smollm2-135m or vllm:/models/Qwen2.5-1.5B")
    python = vllm_python()
    if python is None:
        raise UserError(f"the vllm: backend needs vLLM, which is not installed: {INSTALL_HINT}")
    path = str(embedded_model_dir(rest)) if rest in EMBEDDED else rest
    if python == sys.executable:  # vLLM is importable here: its engine runs in this process
        return VLLMModel(path, name=f"vllm:{rest}", max_batch=max_batch)
    return VLLMServedModel(path, name=f"vllm:{rest}", python=python, request_timeout_s=request_timeout_s)
