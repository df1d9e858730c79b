"""A served run: one run directory, one engine, one ledger and one cache for every request the server answers.

Each request is one arrival of the run loop (`run/loop.py`): the learner of its method (the server's own, or
the one the request names) answers it through the shared `RolloutEngine`, so retries, timeouts, budgets, key
scrubbing and the ledger follow the run rules, and the engine's slots bound the calls in flight across all
requests; the session's one step grades it (unlabelled) and appends it, as for every kind of run. A request's
usage is the sum of its own ledger lines. What was answered goes to `results.jsonl` (an unlabelled result, as
any run writes) and what was asked to `requests.jsonl` (`ServedRecord`: the method, the sampling each kind of
call sent, the seed, the usage), so every answer can be traced and redrawn.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from testtime.benchmarks.code_common import SYSTEM as CODE_SYSTEM
from testtime.benchmarks.dataset import INSTRUCTION
from testtime.core.adaptive import Adaptive
from testtime.core.answers import equivalent
from testtime.core.answers.freeform import final_reply
from testtime.core.errors import RunStopped, UserError
from testtime.core.ledger import Ledger, LedgerTotals
from testtime.core.records import Candidate, Message, Problem, SamplingParams
from testtime.core.results import ProblemResult
from testtime.evaluation.caveats import greedy_samples
from testtime.evaluation.labelfree import answer_logprob, confidence
from testtime.methods import METHODS, Method, PerProblem, load_methods
from testtime.methods.plan import Plan, ProblemSet, RunBase, completed
from testtime.methods.ttrl.online import OnlineTTRL
from testtime.run.engine import method_calls, method_context, open_engine
from testtime.run.lifecycle import ServedDir
from testtime.run.loop import Arrival, Session, unlabelled_of
from testtime.run.settings import RunSettings
from testtime.sandbox import Sandbox
from testtime.sandbox.choose import open_sandbox
from testtime.selectors.freeform import medoid_of
from testtime.serve.learning import ServedArrival, ServedLearning, prompt_of
from testtime.serve.protocol import BadRequest, Domain, ServedRequest

METHOD_CACHE = 64  # distinct method settings kept built (a method and its selector build in ~0.2 ms)


class ServedRecord(BaseModel):
    """One line of `requests.jsonl`: what a request asked and what answering it cost."""

    model_config = ConfigDict(extra="forbid")

    id: str  # also the problem id in results.jsonl, ledger.jsonl and trace.jsonl
    received: float  # unix time
    model: str  # the model name as the client sent it
    method: dict[str, Any]  # the method as it ran: name, options, selector
    domain: Domain
    # who chose the domain: "auto" (the request's words, `--domain auto`), "server" (--domain), "request"
    # (testtime.domain); absent in runs served before `--domain auto`
    domain_from: Literal["auto", "server", "request"] | None = None
    n: int | None
    sampling: dict[str, SamplingParams]  # kind of call → what those calls sent
    seed: int  # the client's, or drawn for this request (send it back as `seed` to redraw the same samples)
    stream: bool
    status: Literal["answered", "failed", "stopped"]
    error: str | None = None
    chosen_by: str | None = None  # set when the reply was chosen among whole replies: no sample had a domain answer
    warnings: list[str] = []  # what makes this answer less than it seems (greedy samples: `evaluation/caveats.py`)
    # the weights that answered (`MODEL+ttrl@STEPS`) on a server that learns (`serve/learning.py`); else absent
    weights: str | None = None
    # a server that learns: who asked (the OpenAI `user` field, else its address), whether it is learned from
    # (admitted to an update's window) and why not (`methods/ttrl/admission.py`); else absent
    client: str | None = None
    learned: bool | None = None
    learned_why: str | None = None
    latency_s: float
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None: some call had no known price


@dataclass
class Answered:
    """A request's outcome: the text to send back (None: it failed, with `error`), and the `testtime` field."""

    record: ServedRecord
    content: str | None
    finish_reason: str
    info: dict[str, Any]

    def model(self, request: ServedRequest) -> str:
        """The reply's `model`: the weights that answered on a server that learns, else the name the client sent."""
        return self.record.weights or request.model

    @property
    def usage(self) -> dict[str, int]:
        r = self.record
        return {"prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
                "total_tokens": r.prompt_tokens + r.completion_tokens}  # fmt: skip


class ServedRun:
    def __init__(
        self,
        opened: ServedDir,
        settings: RunSettings,
        model: Any,
        *,
        domain: str = "auto",
        format_hint: bool = True,
        learns: tuple[Method, Plan] | None = None,
    ) -> None:
        self.opened, self.settings, self.domain, self.format_hint = opened, settings, domain, format_hint
        self.directory = opened.directory
        self.engine = open_engine(settings, model, self.directory)
        # serve checked its upstream at start: an outage later fails those requests (502), never the endpoint
        self.engine.stop_when_unreachable = False
        # a method that learns from the requests (ttrl): one learner for the server's life
        self.learning = self._learning(*learns) if learns else None
        self.session = Session(self.directory, self.engine, unlabelled_of, record_problems=True)
        self.sandbox: Sandbox | None = None
        self._sandbox_lock = asyncio.Lock()
        self._requests = self.directory.requests_path.open("a", encoding="utf-8")
        self._methods: dict[str, PerProblem] = {}  # built methods by (name, domain, options), oldest first
        load_methods()

    def _learning(self, method: Method, plan: Plan) -> ServedLearning:
        ctx = method_context(self.engine, plan, prompt_of, self.settings.seed, workdir=self.directory.path)
        learner = method.learner(ctx)
        assert isinstance(learner, OnlineTTRL), "a served method that learns is a stream's TTRL"
        return ServedLearning(learner, ctx, self.directory)

    @property
    def ledger(self) -> Ledger:
        return self.engine.ledger

    # -- a request's method ---------------------------------------------------------------------------------

    def plan_for(self, request: ServedRequest, max_calls: int | None = None) -> PlannedRequest:
        """The method a request runs and its plan: the server's own options when it names the server's method,
        then the request's (prefix numbers, body options), at the request's sampling and seed (fresh samples
        unless the client pins one). A bad option is the client's mistake: a 400; a plan of more than
        `max_calls` model calls, a 400 before any call is made."""
        own = self.settings.method_options if request.method == self.settings.method else {}
        options = {**own, **request.options}
        key = json.dumps([request.method, request.domain, options], sort_keys=True, default=str)
        method: Method | None = self._learning_method(request)
        method = method or self._methods.get(key)
        if method is None:
            try:
                built = METHODS.get(request.method)(**options)
            except UserError as exc:
                raise BadRequest(str(exc)) from None
            assert isinstance(built, PerProblem)  # every served method solves one problem on its own
            method = built
            if len(self._methods) >= METHOD_CACHE:
                self._methods.pop(next(iter(self._methods)))
            self._methods[key] = method  # a method holds no state of a problem's: requests share one
        seed = request.sampling.get("seed", secrets.randbits(31))
        given = {k: request.sampling.get(k, getattr(self.settings, k)) for k in ("temperature", "top_p", "max_tokens")}
        n = request.n if request.n is not None else self.settings.n
        base = RunBase(model=self.settings.model, n=n, seed=seed, adaptive=self._stopping(request), **given)
        try:
            plan = completed(method, method.plan(ProblemSet(request.domain), base, self.learning is not None))
        except UserError as exc:
            raise BadRequest(str(exc)) from None
        if request.n is not None and "n" in plan.ignores:
            raise BadRequest(f"'n' applies to majority, not {request.method}")
        rule, cap = plan.adaptive, plan.samples
        if rule is not None and cap is not None and (misfit := rule.misfit(cap)) is not None:
            raise BadRequest(f"'testtime.adaptive.{misfit[0]}': {misfit[1]} ('n')")
        if max_calls is not None and plan.calls is not None and plan.calls > max_calls:
            raise BadRequest(
                f"this request plans {plan.calls} model calls; this server allows at most {max_calls} a request "
                "(--max-request-calls)"
            )
        return PlannedRequest(method, plan, seed)

    def _learning_method(self, request: ServedRequest) -> Method | None:
        """A learning server's method: every request is answered by its current weights, with its options."""
        if self.learning is None:
            return None
        name = self.settings.method
        if request.method != name or request.options:
            raise BadRequest(
                f"this server learns from its requests (--method {name}): each is answered by its current "
                f"weights with the server's options; send the model name {self.settings.model} without a method"
            )
        if request.n is not None:  # what it samples is what it learns from: the server's, for every request
            raise BadRequest(
                f"'testtime.n' is not taken by a server that learns: every request is answered by "
                f"{self.learning.online.samples} samples, the votes it learns from"
            )
        if request.weights is not None:
            try:
                self.learning.background.version(request.weights)
            except UserError as exc:
                raise BadRequest(str(exc), 404, "model_not_found") from None
        return self.learning.online.method

    def _sampling_ignored(self, request: ServedRequest) -> str | None:
        """A learning server answers at its evaluation's sampling, whatever a client asks (its votes are what it
        learns from): said in the reply rather than silently dropped."""
        asked = sorted(k for k in ("temperature", "top_p", "max_tokens") if k in request.sampling)
        if self.learning is None or not asked:
            return None
        return f"{', '.join(asked)} ignored: this server learns, and answers at its own evaluation sampling"

    def _stopping(self, request: ServedRequest) -> Adaptive | None:
        """A request's early stop: the server's (nothing asked), the server's or the default rule (true), none
        (false), or the request's own rule."""
        asked = request.adaptive
        if asked is None:
            return self.settings.stopping()
        if asked is True:
            return self.settings.stopping() or Adaptive()
        return asked or None

    def prompt(self, request: ServedRequest) -> list[Message]:
        """The conversation as the client sent it; math asks for a boxed answer (the vote reads it) unless the
        client already did, code gets LiveCodeBench's system prompt unless the client gave one, text nothing."""
        messages = list(request.messages)
        if request.domain == "text":
            return messages
        if request.domain == "code":
            has_system = any(m.role == "system" for m in messages)
            return messages if has_system else [Message(role="system", content=CODE_SYSTEM), *messages]
        last = max(i for i, m in enumerate(messages) if m.role == "user")
        if self.format_hint and "\\boxed" not in messages[last].content:
            messages[last] = Message(role="user", content=f"{messages[last].content}\n{INSTRUCTION}")
        return messages

    async def open_sandbox(self) -> Sandbox:
        """The sandbox code requests run in, opened by the first one (a failure is that request's 503, before
        any call is made or any event streamed)."""
        async with self._sandbox_lock:
            if self.sandbox is None:
                try:
                    self.sandbox = await asyncio.to_thread(open_sandbox, self.settings.sandbox)
                except UserError as exc:  # SandboxError included: no engine, no image, no bubblewrap
                    raise BadRequest(f"code requests need a sandbox: {exc}", 503, "sandbox_unavailable") from None
        return self.sandbox

    # -- answering ------------------------------------------------------------------------------------------

    async def answer(
        self, request: ServedRequest, planned: PlannedRequest, request_id: str, client: str = "unknown"
    ) -> Answered:
        received, started = time.time(), time.perf_counter()
        plan, messages = planned.plan, self.prompt(request)
        greedy = greedy_samples(plan.sampling, plan.samples, plan.calls)
        sandbox = await self.open_sandbox() if request.domain == "code" else None
        ctx = method_context(self.engine, plan, lambda _: messages, planned.seed, sandbox=sandbox)
        # a learning server keeps each prompt with its problem: its updates train on them, in this lifetime or the next
        kept = {"messages": [m.model_dump() for m in messages]} if self.learning else {}
        problem = Problem(id=request_id, domain=request.domain, statement=request.statement, metadata=kept)
        learner = self.learning.arrival(ctx, client, request.weights) if self.learning else planned.method.learner(ctx)
        totals = self.ledger.watch(request_id)
        result: ProblemResult | None = None
        error = None
        try:
            with method_calls(ctx):
                result = await self.session.answer(Arrival(problem, reference=None), learner)
        except RunStopped as exc:  # the server's budget is spent
            error = f"stopped: {exc}"
        finally:
            self.ledger.unwatch(request_id)
        reply = None
        if result is not None:
            reply = reply_of(result, request.domain)
            if reply is None:
                failed = [c.error for c in result.candidates if c.error]
                error = f"upstream failed: {failed[0]}" if failed else "the method drew no sample"
        status: Literal["answered", "failed", "stopped"] = (
            "answered" if reply is not None else "stopped" if result is None else "failed"
        )
        served = ServedRecord(
            id=request_id,
            received=received,
            model=request.model,
            method=dict(plan.method),
            domain=request.domain,
            domain_from=request.domain_from,  # type: ignore[arg-type]
            n=plan.samples,
            sampling=dict(plan.sampling),
            seed=planned.seed,
            stream=request.stream,
            status=status,
            error=error,
            chosen_by=reply.chosen_by if reply else None,
            warnings=[w for w in (greedy, self._sampling_ignored(request)) if w],
            **(learner.recorded() if isinstance(learner, ServedArrival) else {}),
            latency_s=time.perf_counter() - started,
            **_usage(totals),
        )
        self._requests.write(served.model_dump_json() + "\n")
        self._requests.flush()
        content, finish = (reply.text, reply.finish_reason) if reply else (None, "stop")
        return Answered(served, content, finish, _info(result, served))

    def close(self) -> None:
        self._requests.close()
        self.engine.close()
        if self.sandbox is not None:
            self.sandbox.close()


@dataclass(frozen=True)
class PlannedRequest:
    """A request's method, its plan, and the seed its samples follow."""

    method: Method
    plan: Plan
    seed: int


@dataclass
class Reply:
    """The text a request is answered with, why it ended, and (when no sample had an answer of the request's
    domain) how it was chosen among the whole replies."""

    text: str
    finish_reason: str = "stop"
    chosen_by: str | None = None

    @classmethod
    def of(cls, candidate: Candidate, chosen_by: str | None = None) -> Reply:
        return cls(candidate.text, "length" if candidate.finish_reason == "length" else "stop", chosen_by)


def reply_of(result: ProblemResult, domain: str) -> Reply | None:
    """The chosen candidate's text; else the latest candidate with the selected answer (a TRT answer kept from an
    earlier round, its text only in the trace, is sent as that answer, boxed); else, when no sample had an answer
    of the domain (prose to a math server, a chat to a code one), the medoid of the whole replies. None only when
    every sample failed: an upstream failure, the one case without a reply."""
    alive = [c for c in result.candidates if c.error is None]
    chosen = result.selection.index if result.selection is not None else None
    picked = next((c for c in alive if c.index == chosen), None)
    if picked is not None:
        return Reply.of(picked)
    if result.prediction is not None:
        for candidate in reversed(alive):
            if candidate.answer is not None and _same(candidate.answer, result.prediction):
                return Reply.of(candidate)
        return Reply(f"\\boxed{{{result.prediction}}}")
    if not alive:
        return None
    medoid = medoid_of(alive, [final_reply(c.text) or c.text for c in alive])  # an unclosed trace is its text
    picked = next(c for c in alive if c.index == medoid.index)
    return Reply.of(picked, f"medoid of the whole replies (no sample had a {domain} answer)")


def _same(a: str, b: str) -> bool:
    return a == b or equivalent(a, b)


def _usage(totals: LedgerTotals) -> dict[str, Any]:
    return {
        "calls": totals.calls,
        "prompt_tokens": totals.prompt_tokens,
        "completion_tokens": totals.completion_tokens,
        "cost_usd": totals.cost_usd if totals.cost_known else None,
    }


def _info(result: ProblemResult | None, served: ServedRecord) -> dict[str, Any]:
    """The response's `testtime` field: how the answer was chosen, how sure, at what cost."""
    info: dict[str, Any] = {
        "id": served.id,
        "method": served.method,
        "answer": result.prediction if result else None,
        "confidence": confidence(result) if result else None,
        "candidates": [c.answer for c in result.candidates] if result else [],
        "vote_share": result.selection.majority_ratio if result and result.selection else None,
        "logprob_mean": answer_logprob(result) if result else None,  # served with --logprobs; else null
        "calls": served.calls,
        "cost_usd": served.cost_usd,
        "seed": served.seed,
        "latency_s": round(served.latency_s, 4),
    }
    if served.weights is not None:
        info["weights"] = served.weights
    if served.chosen_by is not None:
        info["chosen_by"] = served.chosen_by
    if served.warnings:
        info["warnings"] = served.warnings
    if result is not None and result.rounds:
        info["rounds"] = [{"round": r.round, "answer": r.selected_answer} for r in result.rounds]
    if result is not None and result.adaptive is not None:  # --adaptive: the samples drawn and why it stopped
        info["adaptive"] = result.adaptive.model_dump()
    return info
