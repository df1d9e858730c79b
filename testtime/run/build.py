"""Build what a run needs from its settings — benchmark, method, model, problems, sandbox — before anything
is written, so bad input leaves no trace; and the method's plan (what each kind of call will send)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from testtime.benchmarks import Benchmark, SealedReferences, benchmark_for
from testtime.core.errors import UserError
from testtime.core.model import LanguageModel
from testtime.core.oracle import LabelOracle
from testtime.core.records import Problem
from testtime.methods import METHODS, Method, PerProblem, load_methods
from testtime.models import resolve_model
from testtime.run.manifest import Effective
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
    return METHODS.get(settings.method)(streaming=settings.stream, **settings.method_options)


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
    model: LanguageModel | None  # None in replay: only the cache answers
    problems: list[Problem]
    references: SealedReferences
    sandbox: Sandbox | None = None  # code benchmarks: grading and execution-based selection run here

    def effective(self, settings: RunSettings) -> Effective:
        return effective_plan(self.method, self.benchmark.domain, settings, problems=len(self.problems))

    def close(self) -> None:
        self.benchmark.close()  # the benchmark holds the sandbox it grades in


def effective_plan(method: Method, domain: str, settings: RunSettings, problems: int = 0) -> Effective:
    """What a run will use: the method's sampling per kind of call, its samples per problem, its calls."""
    return Effective(
        n=method.effective_n(settings.n),
        sampling=method.sampling(domain, settings.sampling(method.default_sampling)),
        problems=problems,
        planned_calls_per_problem=method.planned_calls(domain, settings.n),
        uses_labels=method.uses_labels(),
    )


def label_oracle(parts: RunParts) -> LabelOracle | None:
    """The labels' one channel to a method (`core/oracle.py`): open only for a method whose options ask for
    them; None for every other run."""
    if not parts.method.uses_labels():
        return None
    benchmark, references = parts.benchmark, parts.references

    def correct(problem_id: str, answer: str | None) -> bool:
        return answer is not None and benchmark.grade(answer, references[problem_id]).correct

    return LabelOracle(correct=correct)


def check_labels_available(method: Method, benchmark: Benchmark, references: SealedReferences) -> None:
    """A method that trains on the labels needs them, on a domain where grading is cheap and thread-safe."""
    if not method.uses_labels():
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


def check_run_flags(settings: RunSettings, method: Method) -> None:
    """A generic flag the method would ignore is a mistake, not a setting: say what to use instead."""
    for flag in ("n", "temperature", "top_p", "max_tokens"):
        if getattr(settings, flag) is not None and flag not in method.run_flags:
            hint = method.flag_hints.get(flag, "")
            spelled = "--" + flag.replace("_", "-")
            raise UserError(f"--method {method.name} does not use {spelled}" + (f": {hint}" if hint else ""))


def build_parts(settings: RunSettings, replay: bool = False) -> RunParts:
    """Everything a run needs, built before anything is written, so bad input leaves no trace."""
    benchmark, method = build_benchmark(settings), build_method(settings)
    if benchmark.name == "stdin" and not settings.stream:
        raise UserError("--bench - reads a stream from standard input: add --stream")
    if benchmark.name == "stdin" and method.uses_labels():
        raise UserError("the oracle reward trains on labels known before the run; on standard input they come later")
    method.check_stream()
    method.check_model(settings.model)
    method.prepare(benchmark.domain, benchmark.name)  # its selector: a bad --selector or --selector-opt fails here
    problems, references = load_problems(benchmark, settings.limit)
    if settings.shard is not None or settings.shards is not None:
        check_shardable(method, settings)
    if settings.shard is not None:
        problems = shard_of(problems, settings.shard)
    check_labels_available(method, benchmark, references)
    model = None if replay else build_model(settings)
    sandbox = None
    if benchmark.needs_sandbox:
        check_sandbox_choice(settings)
        sandbox = open_sandbox(settings.sandbox)
        benchmark.sandbox = sandbox
    return RunParts(benchmark, method, model, problems, references, sandbox)
