"""Rollout fan-out: n samples per prompt, bounded concurrency, the one place where model calls are retried.

Each sample is one unit of work with its own seed, cache key and ledger line, so a killed run resumes
sample by sample and no sample is ever paid for twice. Local backends batch concurrent units themselves.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

from testtime.core.cache import CompletionCache, cache_key
from testtime.core.call_policy import RetryPolicy, TokenPrice
from testtime.core.declared import malformed, refusal, told_of_direct_call
from testtime.core.errors import (
    BudgetExhausted,
    MalformedAnswer,
    ModelError,
    PlanError,
    RunStopped,
    TransientModelError,
    Unreachable,
    UpstreamDown,
)
from testtime.core.ledger import Ledger, LedgerEntry
from testtime.core.model import CALL_PROBLEM, LanguageModel
from testtime.core.records import Completion, Message, SamplingParams, Usage
from testtime.core.secrets import environment_secrets, scrub
from testtime.core.seeds import SeedScheme, sample_seed
from testtime.core.trace import CALL_ID_LENGTH, Trace

DRAW_WINDOW = 256  # samples of one call built and in flight at a time (at least 4 × the concurrency)


async def gather_landed(*calls: Awaitable[Any]) -> list[Any]:
    """`asyncio.gather`, except that when one call fails (a stop refused it its slot) the others still land
    before the error propagates: a stop never abandons a call in flight, which the server has already charged."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    failure = next((r for r in results if isinstance(r, BaseException)), None)
    if failure is not None:
        raise failure
    return results


@dataclass
class _Unit:
    """One sample to draw: its own parameters (seed), cache key and ledger line."""

    params: SamplingParams
    key: str
    entry: LedgerEntry

    @property
    def call(self) -> str:
        return self.key[:CALL_ID_LENGTH]


class RolloutEngine:
    """Samples completions through cache → backend (with retries) → ledger.

    `model=None` is replay mode: only the cache answers, and a miss is an `error` completion.
    """

    def __init__(
        self,
        model: LanguageModel | None,
        *,
        model_name: str,
        cache: CompletionCache,
        ledger: Ledger,
        concurrency: int = 8,
        retry: RetryPolicy | None = None,
        max_cost_usd: float | None = None,
        max_tokens_total: int | None = None,
        trace: Trace | None = None,
        logprobs: int | None = None,
        n_per_request: bool = False,
        seeds: SeedScheme = "per-problem",
        price: TokenPrice | None = None,
    ) -> None:
        self.model = model
        self.price = price
        self.seeds = seeds
        self.n_per_request = n_per_request  # a problem's samples in one request where the backend takes `n`
        self.logprobs = logprobs  # --logprobs: every call asks for its samples' token statistics
        self.model_name = model_name
        self.cache = cache
        self.ledger = ledger
        self.retry = retry or RetryPolicy()
        self.max_cost_usd, self.max_tokens_total = max_cost_usd, max_tokens_total
        self.concurrency = concurrency
        self._slots = asyncio.Semaphore(concurrency)
        self.trace = trace or Trace(None)
        self.stop: RunStopped | None = None  # set by `request_stop`: no new call starts after it
        # A run's first calls finding no server listening stop it (UpstreamDown) rather than retry every call to
        # the end; once any call was answered, an unreachable server is a transient outage. Serve turns it off.
        self.stop_when_unreachable = True
        self._answered = False
        self._secret_values: list[str] | None = None
        # per problem, the next sample index of each call (model, messages, params, purpose): a second `sample`
        # of the same call draws new samples, not the first ones back from the cache
        self._drawn: dict[str, dict[str, int]] = {}
        self._asked: dict[str, int] = {}  # per problem, the samples its calls asked for: the plan bounds them

    @classmethod
    def in_memory(cls, model: LanguageModel, model_name: str) -> RolloutEngine:
        """An engine outside any run (a judge inside a user's own trainer): its calls cached and counted in memory
        only. A run's engine is built by `run/engine.py`, on the run directory's cache, ledger and trace."""
        return cls(model, model_name=model_name, cache=CompletionCache(None), ledger=Ledger())

    def with_model(self, model: LanguageModel, model_name: str) -> RolloutEngine:
        """Other weights (TTRL's trained model) behind this engine's cache, ledger, trace, retries and budgets;
        `model_name` keys the cache, so no answer of other weights comes back from it."""
        return RolloutEngine(
            model,
            model_name=model_name,
            cache=self.cache,
            ledger=self.ledger,
            concurrency=self.concurrency,
            retry=self.retry,
            max_cost_usd=self.max_cost_usd,
            max_tokens_total=self.max_tokens_total,
            trace=self.trace,
            logprobs=self.logprobs,
            n_per_request=self.n_per_request,
            seeds=self.seeds,
            price=self.price,
        )

    def close(self) -> None:
        """Close the run's files this engine writes (ledger, trace, cache); the model is its owner's to close."""
        self.ledger.close()
        self.trace.close()
        self.cache.close()

    def request_stop(self, reason: RunStopped) -> None:
        """Start no new call from now on (each raises `reason` when it would take its slot); calls in flight
        finish and land in the ledger and the cache."""
        self.stop = reason

    async def sample(
        self,
        messages: Sequence[Message],
        n: int,
        params: SamplingParams,
        *,
        problem_id: str = "",
        purpose: str = "solve",
        step: int | None = None,
        first: int | None = None,
    ) -> list[Completion]:
        """n samples of one call, asked of the engine itself: outside a method (a judge in a user's own trainer,
        a test), and by methods written before the call handle, which a run tells of each such call (one warning)
        and holds to the same rules as a handle's. A method asks through `ctx.on(problem)` (`core/calls.py`)."""
        told_of_direct_call(purpose)
        return await self.draw(messages, n, params, problem_id=problem_id, purpose=purpose, step=step, first=first)

    async def draw(
        self,
        messages: Sequence[Message],
        n: int,
        params: SamplingParams,
        *,
        problem_id: str,
        purpose: str,
        step: int | None = None,
        first: int | None = None,
    ) -> list[Completion]:
        """n samples of one call. Each call of a problem draws fresh sample indices: a second call with the same
        messages and params continues where the first stopped (indices n..2n-1), so its samples are new ones;
        `first=0` asks for the first call's samples again. A resumed run makes its calls in the same order, so
        it meets the same indices and its cache answers exactly what was paid for."""
        refused = malformed(n, messages) or refusal(params, problem_id, purpose, n, self._asked.get(problem_id, 0))
        if refused is not None:
            raise PlanError(refused)
        self._asked[problem_id] = self._asked.get(problem_id, 0) + n
        start = self._next_index(messages, params, problem_id, purpose, n) if first is None else first
        together = self.n_per_request and n > 1 and self.model is not None and self.model.takes_n
        drawn: list[Completion] = []
        # In windows: nothing is built per planned sample ahead of its turn (a mistyped --n 100000000 once built
        # 21.7 GB of pending samples with the event loop blocked, deaf to SIGTERM), and the loop runs between
        # windows, so a stop is heard. A window keeps every slot busy.
        window = max(DRAW_WINDOW, 4 * self.concurrency)
        for low in range(start, start + n, window):
            indices = range(low, min(low + window, start + n))
            units = [self._unit(messages, params, i, problem_id, purpose, step) for i in indices]
            if together:
                drawn += await self._together(messages, units)
            else:
                drawn += await gather_landed(*(self._one(messages, unit) for unit in units))
        return drawn

    def _next_index(
        self, messages: Sequence[Message], params: SamplingParams, problem_id: str, purpose: str, n: int
    ) -> int:
        drawn = self._drawn.setdefault(problem_id, {})
        call = f"{purpose}\x00{cache_key(self.model_name, messages, params, 0)}"
        start = drawn.get(call, 0)
        drawn[call] = start + n
        return start

    def draws(self, problem_id: str) -> dict[str, int]:
        """How far each call of the problem has drawn (a checkpoint keeps it: `core/checkpoint.py`)."""
        return dict(self._drawn.get(problem_id, {}))

    def restore_draws(self, problem_id: str, draws: dict[str, int]) -> None:
        """Continue each call of the problem where a checkpoint says it stood (a resumed method's next draw)."""
        self._drawn[problem_id] = {str(k): int(v) for k, v in draws.items()}

    def forget(self, problem_id: str) -> None:
        """The problem is answered: its draw counters go (a served run's engine meets millions of requests)."""
        self._drawn.pop(problem_id, None)
        self._asked.pop(problem_id, None)

    def _unit(
        self,
        messages: Sequence[Message],
        params: SamplingParams,
        index: int,
        problem_id: str,
        purpose: str,
        step: int | None,
    ) -> _Unit:
        seed = sample_seed(params.seed, index, problem_id, purpose, self.seeds)
        params = params.model_copy(update={"seed": seed, "logprobs": self.logprobs})
        key = cache_key(self.model_name, messages, params, index)
        entry = LedgerEntry(
            model=self.model_name, problem_id=problem_id, purpose=purpose, sample_index=index, step=step
        )
        return _Unit(params, key, entry)

    def _hit(self, messages: Sequence[Message], unit: _Unit) -> Completion | None:
        """The unit's answer from the cache (recorded as a hit), or a replay's miss; None: ask the model."""
        hit = self.cache.get(unit.key)
        if hit is not None:
            unit.entry.cached = True
            unit.entry.truncated = hit.finish_reason == "length"
            self.ledger.record(unit.entry)
            cached = hit.model_copy(update={"cached": True, "call": unit.call})
            return self._traced(cached, "cached", messages, unit.entry)
        if self.model is None:
            missing = Completion(finish_reason="error", error="replay: sample not in the cache", call=unit.call)
            return self._traced(missing, "missing", messages, unit.entry)
        return None

    async def _one(self, messages: Sequence[Message], unit: _Unit) -> Completion:
        answered = self._hit(messages, unit)
        if answered is not None:
            return answered
        (completion,), attempts = await self._call(messages, unit.params, unit.entry, 1)
        return self._land(messages, unit, completion, attempts)

    async def _together(self, messages: Sequence[Message], units: list[_Unit]) -> list[Completion]:
        """--n-per-request: the samples the cache lacks in one request (one prefill on the server); each still
        gets its own cache key and ledger line, the request's tokens on the first (`request_samples` on all)."""
        answers = [self._hit(messages, unit) for unit in units]
        asked = [unit for unit, answer in zip(units, answers, strict=True) if answer is None]
        if asked:
            completions, attempts = await self._call(messages, asked[0].params, asked[0].entry, len(asked))
            pairs = zip(asked, completions, strict=True)
            landed = iter([self._land(messages, unit, c, attempts, len(asked)) for unit, c in pairs])
            answers = [answer if answer is not None else next(landed) for answer in answers]
        return [answer for answer in answers if answer is not None]

    def _land(
        self, messages: Sequence[Message], unit: _Unit, completion: Completion, attempts: int, together: int = 1
    ) -> Completion:
        """A sample the model answered: made recordable, scrubbed, cached when it succeeded, one ledger line, traced.
        Validated again rather than copied: a backend's `model_copy` skips the validators that make text recordable,
        and a reply that cannot be written would stop the run before its ledger line, on every resume."""
        completion = Completion.model_validate(completion.model_dump() | {"call": unit.call})
        if completion.error is None:
            secrets = self._secrets()
            if any(s in completion.text for s in secrets):  # a server that echoes the key in its answer
                completion = completion.model_copy(update={"text": scrub(completion.text, secrets)})
            self.cache.put(unit.key, completion)
        else:  # error texts may echo a key back (a 401 body does): never record or show one
            completion = completion.model_copy(update={"error": scrub(completion.error, self._secrets())})
        entry = unit.entry
        entry.attempts = attempts
        entry.prompt_tokens = completion.usage.prompt_tokens
        entry.completion_tokens = completion.usage.completion_tokens
        entry.tokens_known = completion.usage.known
        entry.truncated = completion.finish_reason == "length"
        entry.latency_s = completion.latency_s
        entry.cost_usd = completion.cost_usd
        if entry.cost_usd is None and self.price is not None and completion.error is None:
            entry.cost_usd = self.price.cost(completion.usage)
        entry.error = completion.error
        entry.request_samples = together if together > 1 else None
        self.ledger.record(entry)
        return self._traced(completion, "error" if completion.error else "paid", messages, entry)

    def _traced(
        self, completion: Completion, outcome: Any, messages: Sequence[Message], entry: LedgerEntry
    ) -> Completion:
        self.trace.record(
            call=completion.call or "",
            time=time.time(),
            model=self.model_name,
            messages=list(messages),
            completion=completion,
            outcome=outcome,
            problem_id=entry.problem_id,
            purpose=entry.purpose,
            step=entry.step,
            sample_index=entry.sample_index,
        )
        return completion

    def _secrets(self) -> list[str]:
        """Every key to scrub, gathered on first use: reading the environment per call cost a server 0.2 ms
        a request, and the keys of a process's backends do not change while it runs."""
        if self._secret_values is None:
            self._secret_values = [*(self.model.secrets() if self.model is not None else []), *environment_secrets()]
        return self._secret_values

    def _check_budget(self) -> None:
        """Refuse a new paid call once a budget is spent or a stop was asked for. Checked when a call has its
        slot, just before it is sent: calls queued behind the slots never pass on a budget that calls in flight
        are about to spend, so a run overshoots by at most the calls in flight (which still land in the ledger)."""
        if self.stop is not None:
            # A copy per refused call: raised itself, the reason the engine keeps would gather each call's frames
            # on its traceback (a served request's 200,000 refused calls kept 2.5 M objects alive after the stop).
            raise self.stop.again()
        totals = self.ledger.totals
        if self.max_cost_usd is not None and totals.cost_usd >= self.max_cost_usd:
            raise BudgetExhausted("cost", totals.cost_usd, self.max_cost_usd)
        if self.max_tokens_total is not None and totals.tokens >= self.max_tokens_total:
            raise BudgetExhausted("token", totals.tokens, self.max_tokens_total)

    async def _call(
        self, messages: Sequence[Message], params: SamplingParams, entry: LedgerEntry, n: int
    ) -> tuple[list[Completion], int]:
        """`n` samples in one model call (1 unless --n-per-request), retried here and only here; a call that
        fails for good returns `n` failed completions (the first carrying what a malformed answer used)."""
        assert self.model is not None
        policy = self.retry
        malformed = 0
        CALL_PROBLEM.set(entry.problem_id or None)  # this task's calls: the fleet keeps a problem on one server
        for attempt in range(1, policy.max_attempts + 1):
            started = time.perf_counter()
            try:
                async with self._slots:
                    self._check_budget()
                    try:
                        result = await asyncio.wait_for(
                            self.model.generate(messages, n, params), timeout=policy.call_timeout_s
                        )
                    except asyncio.CancelledError:  # sent, perhaps paid: never missing from the ledger
                        self._cancelled_in_flight(entry, time.perf_counter() - started)
                        raise
                self._answered = True
                if len(result) != n:
                    raise MalformedAnswer(f"{len(result)} samples where {n} were asked for")
                return result, attempt
            except MalformedAnswer as exc:
                malformed += 1
                if malformed >= policy.malformed_attempts or attempt == policy.max_attempts:
                    failed = self._failed(f"malformed answer: {exc}", "error", started, attempt)
                    first = failed.model_copy(update={"usage": exc.usage or Usage(known=False)})
                    return [first, *[failed] * (n - 1)], attempt
                self._paid_attempt(entry, exc, time.perf_counter() - started)  # the sample's own line is the last
                await asyncio.sleep(policy.delay(attempt, None))
            except (TransientModelError, asyncio.TimeoutError) as exc:
                retry_after = exc.retry_after if isinstance(exc, TransientModelError) else None
                reason = "timeout" if isinstance(exc, asyncio.TimeoutError) else "error"
                if isinstance(exc, asyncio.TimeoutError):
                    message = f"no answer within the request timeout of {policy.call_timeout_s:g} s"
                else:
                    message = str(exc) or type(exc).__name__
                if isinstance(exc, Unreachable) and self.stop_when_unreachable and not self._answered:
                    self.request_stop(
                        UpstreamDown(
                            f"{self.model_name}: no server is listening ({message}) and no call has reached one: "
                            "is it running, and is --api-base right? Resume once it is up"
                        )
                    )
                    raise self.stop.again() from None  # type: ignore[union-attr] - set just above
                if attempt == policy.max_attempts:
                    return [self._failed(message, reason, started, attempt)] * n, attempt
                await asyncio.sleep(policy.delay(attempt, retry_after))
            except ModelError as exc:
                return [self._failed(str(exc), "error", started, attempt)] * n, attempt
        raise AssertionError("unreachable: the loop returns on its last attempt")

    def _cancelled_in_flight(self, entry: LedgerEntry, latency: float) -> None:
        """A call cancelled after it was sent (a second Ctrl-C, a server's stop past its drain): its own ledger
        line, tokens unknown, since the server may have charged for it."""
        self.ledger.record(
            entry.model_copy(
                update={
                    "attempts": 1,
                    "tokens_known": False,
                    "latency_s": latency,
                    "error": "cancelled in flight: the run stopped before the answer arrived (tokens unknown)",
                }
            )
        )

    def _paid_attempt(self, entry: LedgerEntry, exc: MalformedAnswer, latency: float) -> None:
        """A malformed 200 was still a paid call: its own ledger line, with whatever tokens it reported."""
        usage = exc.usage
        self.ledger.record(
            entry.model_copy(
                update={
                    "attempts": 1,
                    "prompt_tokens": usage.prompt_tokens if usage else 0,
                    "completion_tokens": usage.completion_tokens if usage else 0,
                    "tokens_known": bool(usage and usage.known),
                    "latency_s": latency,
                    "cost_usd": exc.cost_usd,
                    "error": scrub(f"malformed answer: {exc}", self._secrets()),
                }
            )
        )

    @staticmethod
    def _failed(message: str, reason: str, started: float, attempts: int) -> Completion:
        return Completion(
            finish_reason="timeout" if reason == "timeout" else "error",
            error=f"{message} (after {attempts} attempt{'s' if attempts > 1 else ''})",
            latency_s=time.perf_counter() - started,
        )
