"""Build what a run needs from its settings — benchmark, method, model, problems, sandbox — before anything
is written, so bad input leaves no trace; and the method's plan (what it will do: `methods/plan.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from testtime.benchmarks import Benchmark, SealedReferences, benchmark_for
from testtime.core.adaptive import FLAGS
from testtime.core.errors import UserError
from testtime.core.model import LanguageModel
from testtime.core.oracle import LabelOracle
from testtime.core.records import Problem
from testtime.methods import METHODS, Method, PerProblem, load_methods
from testtime.methods.plan import GENERIC_FLAGS, Domain, Plan, ProblemSet, completed
from testtime.models import resolve_model
from testtime.run.manifest import Effective, RunManifest
from testtime.run.settings import RunSettings
from testtime.run.shard import shard_of
from testtime.sandbox import Sandbox
from testtime.sandbox.choose import CHOICES, open_sandbox


def build_benchmark(settings: RunSettings) -> Benchmark:
    return benchmark_for(settings.bench, settings.data_dir, settings.bench_options, settings.limit)


def data_changed(recorded: dict[str, Any], benchmark: Benchmark) -> bool:
    """Whether a benchmark's data differs from the data a run recorded (its sha256; unknown counts as same)."""
    then, now = recorded.get("sha256"), benchmark.describe().get("sha256")
    return bool(then and now and then != now)


def build_method(settings: RunSettings) -> Method:
    load_methods()
    return METHODS.get(settings.method)(**settings.method_options)


def build_model(settings: RunSettings) -> LanguageModel:
    """The backend `--model` names, with the run's servers, key variable, batch size and timeout."""
    model = resolve_model(
        settings.model,
        api_base=settings.api_base,
        api_key_env=settings.api_key_env,
        routing=settings.routing,
        max_batch=settings.concurrency,
        request_timeout_s=settings.request_timeout,
    )
    if settings.n_per_request and not model.takes_n:
        raise UserError(f"--n-per-request: {model.name} takes one sample a request (openai: servers take n)")
    if settings.logprobs is not None and model.token_stats is None:
        raise UserError(f"--logprobs: {model.name} gives no token log-probabilities (hf:, vllm:, openai:, litellm: do)")
    return model


def load_problems(benchmark: Benchmark, limit: int | None) -> tuple[list[Problem], SealedReferences]:
    problems, references = benchmark.load()
    return (problems[:limit] if limit else problems), references


@dataclass
class RunParts:
    benchmark: Benchmark
    method: Method
    plan: Plan  # what the method will do on these problems: the manifest records it, the context carries it
    model: LanguageModel | None  # None in replay: only the cache answers
    problems: list[Problem]
    references: SealedReferences
    sandbox: Sandbox | None = None  # code benchmarks: grading and execution-based selection run here

    def effective(self) -> Effective:
        return Effective.of(self.plan, problems=len(self.problems))

    def close(self) -> None:
        self.benchmark.close()  # the benchmark holds the sandbox it grades in


def plan_of(method: Method, settings: RunSettings, domain: Domain, bench: str = "") -> Plan:
    """The method's plan for these settings on a problem set (serve: the server's own domain, no benchmark)."""
    return completed(method, method.plan(ProblemSet(domain, bench), settings.base(), settings.stream))


def label_oracle(parts: RunParts) -> LabelOracle | None:
    """The labels' one channel to a method (`core/oracle.py`): open only for a plan whose options ask for
    them; None for every other run."""
    if not parts.plan.uses_labels:
        return None
    benchmark, references = parts.benchmark, parts.references

    def correct(problem_id: str, answer: str | None) -> bool:
        return answer is not None and benchmark.grade(answer, references[problem_id]).correct

    return LabelOracle(correct=correct)


def check_labels_available(plan: Plan, benchmark: Benchmark, references: SealedReferences) -> None:
    """A method that trains on the labels needs them, on a domain where grading is cheap and thread-safe."""
    if not plan.uses_labels:
        return
    if benchmark.domain == "code":
        raise UserError("the oracle reward grades math answers; on code it is not built yet (hidden tests per sample)")
    missing = sum(not r.labelled for r in references.values())
    if missing:
        raise UserError(f"the oracle reward trains on the labels, and {missing} problems here have none")


def check_shardable(method: Method, settings: RunSettings) -> None:
    """Only a method that solves each problem on its own gives the same answers in shards as in one run."""
    if settings.stream:
        raise UserError("--shard splits a batch run; a --stream answers its problems in one order, on one learner")
    if not isinstance(method, PerProblem):
        raise UserError(
            f"--method {method.name} learns across the problems (one model trained on all of them): a shard would "
            "train another model on each slice; run it unsharded, or on verl across nodes (testtime ttrl verl)"
        )


def check_sandbox_choice(settings: RunSettings) -> None:
    if settings.sandbox not in CHOICES:
        raise UserError(f"--sandbox must be one of {', '.join(CHOICES)}, not '{settings.sandbox}'")


def tuned_set_note(manifest: RunManifest) -> str | None:
    """Why a run's problems are those its method's preset was tuned on (TTRL's `tuned_on`), else None."""
    from testtime.methods.ttrl.recipe import on_tuned_set

    return on_tuned_set(manifest.method.get("tuned_on"), manifest.benchmark)


def budget_warnings(settings: RunSettings, model: Any) -> list[str]:
    """A budget that cannot bind, said before the first call: --max-cost over a model whose calls come back
    unpriced would let the run spend without limit (the ledger's cost stays $0 and unknown)."""
    if settings.max_cost is None or settings.price or model is None or model.prices_calls:
        return []
    return [
        f"--max-cost cannot bind: {settings.model} returns no price for its calls; give --price PROMPT,COMPLETION "
        "(USD per million tokens), or bound tokens with --max-tokens-total"
    ]


def check_plan_size(settings: RunSettings, plan: Plan, problems: int | None) -> None:
    """A plan past the ceiling is refused before anything is paid or built per sample (a mistyped `--n 100000000`
    once grew to 21.7 GB; `rounds=10^23` started without a word). A stream's problems are not known ahead: each
    arrival's calls are checked."""
    if plan.calls is None:
        return
    count = max(problems or 1, 1)
    total = plan.calls * count
    if total <= settings.max_planned_calls:
        return
    shape = ", ".join(f"{k} {v:,}" for k, v in (("samples", plan.samples), ("rounds", plan.rounds)) if v)
    culprit = "--n" if plan.samples and plan.samples * count > settings.max_planned_calls else "--method-opt"
    raise UserError(
        f"this run plans {total:,} model calls ({plan.calls:,} a problem{f': {shape}' if shape else ''}; × {count:,} "
        f"problems), over the ceiling of {settings.max_planned_calls:,}: check {culprit}, or pass "
        f"--max-planned-calls {total} if you mean it"
    )


def check_run_flags(settings: RunSettings, plan: Plan) -> None:
    """A generic flag the method's plan leaves alone is a mistake, not a setting: say what to use instead."""
    if plan.selector is not None and plan.selector.needs_token_stats() and settings.logprobs is None:
        raise UserError(
            f"the {plan.selector.name} selector as asked weighs each sample by its token confidence: add --logprobs "
            "(hf: and vllm: give it; openai: and litellm: servers that return logprobs)"
        )
    rule, cap = plan.adaptive, plan.samples
    if rule is not None and cap is not None and (misfit := rule.misfit(cap)) is not None:
        field, why = misfit
        raise UserError(f"--{FLAGS[field].replace('_', '-')}: {why} (--n)")
    if settings.adaptive and plan.adaptive is None:
        raise UserError(
            f"--adaptive stops a vote once it is settled; --method {settings.method} draws no vote to stop "
            "(majority does; a stream's TTRL answers by one)"
        )
    for flag in GENERIC_FLAGS:
        if getattr(settings, flag) is not None and flag in plan.ignores:
            hint = plan.ignores[flag]
            spelled = "--" + flag.replace("_", "-")
            raise UserError(f"--method {settings.method} does not use {spelled}" + (f": {hint}" if hint else ""))


def build_parts(settings: RunSettings, replay: bool = False) -> RunParts:
    """Everything a run needs, built before anything is written, so bad input leaves no trace."""
    benchmark, method = build_benchmark(settings), build_method(settings)
    if benchmark.name == "stdin" and not settings.stream:
        raise UserError("--bench - reads a stream from standard input: add --stream")
    # a model, stream, --selector or --selector-opt the method cannot run with fails here, before anything is written
    plan = plan_of(method, settings, benchmark.domain, benchmark.name)
    if benchmark.name == "stdin" and plan.uses_labels:
        raise UserError("the oracle reward trains on labels known before the run; on standard input they come later")
    problems, references = load_problems(benchmark, settings.limit)
    if settings.shard is not None or settings.shards is not None:
        check_shardable(method, settings)
    if settings.shard is not None:
        problems = shard_of(problems, settings.shard)
    check_labels_available(plan, benchmark, references)
    model = None if replay else build_model(settings)
    sandbox = None
    if benchmark.needs_sandbox:
        check_sandbox_choice(settings)
        sandbox = open_sandbox(settings.sandbox)
        benchmark.sandbox = sandbox
    return RunParts(benchmark, method, plan, model, problems, references, sandbox)
