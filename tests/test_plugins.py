"""Plugins without forking: a file (`--plugin`, `TESTTIME_PLUGINS`) or an installed package's `testtime` entry
points add a method, a selector, a benchmark, a reward and a model provider, found by name by `run`, `list`,
`--help` and the API. A plugin that fails is one line; unrelated commands go on. Each case is a fresh process:
registries are per process, as they are for a user."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from testtime.core.ledger import read_entries

PLUGIN = textwrap.dedent(
    '''
    """Every extension point at once: a method, a selector, a benchmark, a reward and a model provider."""
    from testtime.api import (
        BENCHMARKS, METHODS, MODELS, REWARDS, SELECTORS, Benchmark, Grade, Message, Options, PerProblem, Problem,
        ProblemResult, Reference, SealedReferences, Selection, Selector, flag, make_candidates,
    )
    from testtime.models.fake import FakeModel


    class ShoutOptions(Options):
        loud: bool = flag(False, "append an exclamation mark", "--loud")


    @METHODS.register("shout", help="one sample, shouted")
    class Shout(PerProblem):
        name = "shout"
        Options = ShoutOptions

        async def solve(self, problem, ctx):
            completions = await ctx.engine.sample(ctx.prompt(problem), 1, ctx.sampled("solve"), problem_id=problem.id)
            candidates = make_candidates(problem, completions)
            return ProblemResult(problem_id=problem.id, prediction=candidates[0].answer, candidates=candidates)


    @SELECTORS.register("last", help="the last candidate with an answer")
    class Last(Selector):
        name = "last"

        async def select(self, problem, candidates, ctx):
            chosen = [c for c in candidates if c.answer is not None][-1:]
            return Selection(
                selector=self.name, rule="last", index=chosen[0].index if chosen else None,
                answer=chosen[0].answer if chosen else None,
            )


    @BENCHMARKS.register("sevens", help="three problems whose answer is 7")
    class Sevens(Benchmark):
        name = "sevens"
        domain = "math"

        def load(self):
            problems = [Problem(id=f"s{i}", domain="math", statement=f"What is {i} + {7 - i}?") for i in range(3)]
            return problems, SealedReferences([Reference(problem_id=p.id, answer="7") for p in problems])

        def prompt(self, problem):
            return [Message(role="user", content=problem.statement)]

        def grade(self, prediction, reference):
            return Grade(correct=prediction == reference.answer, answer=prediction, status="graded")


    @REWARDS.register("always_one", help="a reward of 1 for every sample")
    def always_one(*, vote, **_):
        return [1.0 for _ in vote.kept]


    @MODELS.register("seven", help="always answers 7")
    def seven(rest, **_):
        return FakeModel(lambda messages, params: "\\\\boxed{7}", name="seven:")
    '''
)


def _plugin(tmp_path: Path, text: str = PLUGIN, name: str = "extras.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_plugin_file_adds_every_kind_of_extension_to_list(testtime_process) -> None:
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="p", dir="/tmp"))  # the table's cell holds the path without a wrap
    # a wide terminal: each row on one line (piped, `list` is as wide as $COLUMNS, else 80)
    result = testtime_process("--plugin", str(_plugin(short)), "list", env={"COLUMNS": "200"})
    assert result.returncode == 0, result.stderr
    listed = result.stdout
    kinds = [("method", "shout"), ("selector", "last"), ("benchmark", "sevens"), ("model provider", "seven")]
    for kind, name in [*kinds, ("ttrl reward", "always_one")]:
        row = next((line for line in listed.splitlines() if kind in line and f" {name} " in line), "")
        assert row and "(plugin" in row, (kind, name)
    assert "plugin" in listed and "extras.py" in listed
    assert "warning" not in result.stderr


def test_a_plugin_method_runs_on_a_plugin_benchmark_with_a_plugin_model(tmp_path: Path, testtime_process) -> None:
    out = tmp_path / "run"
    # --plugin after the command, as lighteval's --custom-tasks; the method's own flag (--loud) is accepted
    result = testtime_process(
        "run", "--method", "shout", "--bench", "sevens", "--model", "seven:", "--loud", "--out", str(out), "--quiet",
        "--plugin", str(_plugin(tmp_path)),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "shout" and summary["accuracy"]["mean"] == 1.0
    manifest = json.loads((out / "config.json").read_text())
    assert manifest["method"]["loud"] is True


def test_run_help_lists_a_plugin_methods_flags(tmp_path: Path, testtime_process) -> None:
    result = testtime_process("run", "--help", "--plugin", str(_plugin(tmp_path)))
    assert result.returncode == 0, result.stderr
    assert "--method shout: --loud" in " ".join(result.stdout.split())


def test_a_plugin_selector_and_reward_are_chosen_by_name(tmp_path: Path, testtime_process) -> None:
    out = tmp_path / "run"
    result = testtime_process(
        "run", "--method", "majority", "--selector", "last", "--bench", "sevens", "--model", "seven:", "--n", "2",
        "--out", str(out), "--quiet", "--plugin", str(_plugin(tmp_path)),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    first = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert first["selection"]["selector"] == "last" and first["selection"]["rule"] == "last"
    settings = (
        "from testtime.methods.ttrl.recipe import TTRLSettings as S; print(S.from_options({'reward': %s}).reward)"
    )
    accepted = _env_python(tmp_path, settings % "'always_one'")
    assert accepted.stdout.strip() == "always_one", accepted.stderr
    refused = _env_python(tmp_path, settings % "'always_two'")
    assert "unknown reward 'always_two'; available: always_one, entropy" in refused.stderr


def _env_python(tmp_path: Path, code: str):
    import os
    import subprocess
    import sys

    env = {**os.environ, "TESTTIME_PLUGINS": str(_plugin(tmp_path))}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_testtime_plugins_in_the_environment_reaches_the_python_api(tmp_path: Path) -> None:
    out = str(tmp_path / "api-run")
    code = (
        f"import testtime; r = testtime.run_method('shout', bench='sevens', model='seven:', out={out!r}); "
        "print(r.summary.accuracy.mean, r.predictions()[0].prediction)"
    )
    result = _env_python(tmp_path, code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1.0", "7"]


def test_a_broken_plugin_is_one_line_and_other_commands_go_on(tmp_path: Path, testtime_process) -> None:
    broken = _plugin(tmp_path, "import not_a_module_anywhere\n", "broken.py")
    raising = _plugin(tmp_path, "raise SystemExit('plugins must not exit the host')\n", "exits.py")
    result = testtime_process("--plugin", str(broken), "--plugin", str(raising), "list")
    assert result.returncode == 0, result.stderr
    assert "majority" in result.stdout  # the built-ins are all there
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, result.stderr
    assert "broken.py failed to load: ModuleNotFoundError" in lines[0]
    assert "exits.py failed to load: SystemExit" in lines[1]
    assert "Traceback" not in result.stderr


def test_help_and_version_load_no_plugin(tmp_path: Path, testtime_process) -> None:
    """A plugin that hangs, or ends the process at import, cannot take `--help` or `--version` with it."""
    for text in ("import time\ntime.sleep(60)\n", "import os\nos._exit(0)\n"):
        plugin = str(_plugin(tmp_path, text, "hostile.py"))
        shown = testtime_process("--plugin", plugin, "--help", timeout=30)
        assert shown.returncode == 0 and "Commands" in shown.stdout and "run" in shown.stdout, shown.stderr
        version = testtime_process("--plugin", plugin, "--version", timeout=30)
        assert version.returncode == 0 and version.stdout.startswith("testtime "), version.stderr


def test_a_plugin_that_hangs_or_interrupts_its_import_is_one_line(tmp_path: Path, testtime_process) -> None:
    slow = str(_plugin(tmp_path, "import time\ntime.sleep(60)\n", "slow.py"))
    interrupting = str(_plugin(tmp_path, "raise KeyboardInterrupt\n", "interrupting.py"))
    result = testtime_process(
        "--plugin", slow, "--plugin", interrupting, "list", env={"TESTTIME_PLUGIN_TIMEOUT": "1"}, timeout=30
    )
    assert result.returncode == 0 and "majority" in result.stdout, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 2 and "Traceback" not in result.stderr, result.stderr
    assert "slow.py failed to load: TimeoutError: still loading after 1 s" in lines[0]
    assert "interrupting.py failed to load: KeyboardInterrupt" in lines[1]


def test_a_plugin_cannot_defeat_the_load_bound_or_end_the_run_at_load(tmp_path: Path, testtime_process) -> None:
    """A plugin that caught SIGALRM once held a load for 23-26 s past a 1 s bound; one that called os._exit(7)
    ended the command without a word."""
    import time

    text = "import signal, time\ntry:\n    signal.signal(signal.SIGALRM, lambda *_: None)\nexcept ValueError:\n"
    text += "    pass\nfor _ in range(600):\n    time.sleep(0.1)\n"
    stubborn = _plugin(tmp_path, text, "stubborn.py")
    leaving = _plugin(tmp_path, "import os\nos._exit(7)\n", "leaving.py")
    started = time.monotonic()
    result = testtime_process("--plugin", str(stubborn), "--plugin", str(leaving), "list",
                              env={"TESTTIME_PLUGIN_TIMEOUT": "1"}, timeout=60)  # fmt: skip
    assert time.monotonic() - started < 30
    assert result.returncode == 0 and "majority" in result.stdout, result.stderr
    assert "stubborn.py failed to load: TimeoutError: still loading after 1 s, abandoned" in result.stderr
    assert "leaving.py failed to load: PluginExited: called os._exit(7) while loading" in result.stderr


def test_a_plugin_reusing_a_builtin_name_fails_alone(tmp_path: Path, testtime_process) -> None:
    clash = textwrap.dedent(
        """
        from testtime.api import METHODS, PerProblem

        @METHODS.register("majority")
        class Impostor(PerProblem):
            name = "majority"
            async def solve(self, problem, ctx):
                raise AssertionError("never the built-in's place")
        """
    )
    out = tmp_path / "run"
    result = _arith_with(testtime_process, _plugin(tmp_path, clash, "clash.py"), out)
    assert "clash.py failed to load: ValueError: method 'majority' registered twice" in result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["method"] == "majority" and summary["problems"] == 2 and summary["error_rate"] == 0


def test_a_plugin_cannot_squat_a_builtins_name_before_the_builtin_loads(tmp_path: Path, testtime_process) -> None:
    # the plugin loads before anything read the benchmarks: its registration loads the built-ins first
    squatter = textwrap.dedent(
        """
        from testtime.api import BENCHMARKS, Benchmark

        @BENCHMARKS.register("arith")
        class Squatter(Benchmark):
            name = "arith"
        """
    )
    out = tmp_path / "run"
    result = _arith_with(testtime_process, _plugin(tmp_path, squatter, "squat.py"), out)
    assert "squat.py failed to load: ValueError: benchmark 'arith' registered twice" in result.stderr
    assert json.loads((out / "config.json").read_text())["benchmark"]["digits"] == 2  # the built-in arith


def _arith_with(testtime_process, plugin: Path, out: Path):  # type: ignore[no-untyped-def]
    """`run` on the built-in arith with a plugin given; it must succeed whatever the plugin did."""
    result = testtime_process(
        "--plugin", str(plugin), "run", "--bench", "arith", "--limit", "2", "--model", "fake:echo",
        "--out", str(out), "--quiet",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result


def test_a_missing_plugin_file_is_a_user_error(tmp_path: Path, testtime_process) -> None:
    result = testtime_process("--plugin", str(tmp_path / "nowhere.py"), "list")
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: --plugin {tmp_path / 'nowhere.py'}: not a readable .py file"


def test_resuming_a_plugin_run_without_its_plugin_says_how(tmp_path: Path, testtime_process) -> None:
    out = tmp_path / "run"
    plugin = str(_plugin(tmp_path))
    first = testtime_process(
        "run", "--method", "shout", "--bench", "sevens", "--model", "seven:", "--out", str(out), "--quiet",
        "--plugin", plugin, "--max-tokens-total", "1",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr  # every call was in flight before the budget was spent
    again = testtime_process("run", "--resume", str(out), "--quiet")
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert "unknown benchmark 'sevens'" in again.stderr and "--plugin FILE.py" in again.stderr
    resumed = testtime_process(
        "run", "--resume", str(out), "--quiet", "--plugin", plugin, "--max-tokens-total", "100000"
    )
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((out / "summary.json").read_text())["problems"] == 3


def test_an_installed_packages_entry_points_register_by_name(tmp_path: Path, testtime_process) -> None:
    late = (
        "from testtime.api import METHODS\nfrom testtime.methods.single import Single\n\n"
        "def register():\n    METHODS.register('late-single')(type('LateSingle', (Single,), {'name': 'late-single'}))\n"
    )
    env = _install(tmp_path, "ttplug", {"__init__.py": PLUGIN, "late.py": late},
                   "extras = ttplug\nlate = ttplug.late:register")  # fmt: skip
    listed = testtime_process("list", env={**env, "COLUMNS": "200"})
    assert listed.returncode == 0, listed.stderr
    assert " shout " in listed.stdout and " late-single " in listed.stdout
    assert "extras (ttplug, from ttplug)" in " ".join(listed.stdout.split())
    out = tmp_path / "run"
    ran = testtime_process(
        "run", "--method", "late-single", "--bench", "sevens", "--model", "seven:", "--out", str(out), "--quiet",
        env=env,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert json.loads((out / "summary.json").read_text())["method"] == "late-single"


def _install(tmp_path: Path, package: str, files: dict[str, str], entry_points: str) -> dict[str, str]:
    """`package` installed as pip would leave it (its files and a dist-info with `testtime` entry points) in a
    folder of `tmp_path`; the environment that puts it on a process's path."""
    site = tmp_path / "site"
    (site / package).mkdir(parents=True)
    for name, text in files.items():
        (site / package / name).write_text(text)
    info = site / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[testtime]\n{entry_points}\n")
    return {"PYTHONPATH": str(site)}


SHOUT = (
    "from testtime.api import METHODS\nfrom testtime.methods.single import Single\n\n"
    "@METHODS.register('shout', help='one sample')\nclass Shout(Single):\n    pass\n"
)  # the plugins page's shout.py shape: it imports METHODS and registers before any built-in method loaded


def _installed(tmp_path: Path) -> dict[str, str]:
    return _install(tmp_path, "shoutplug", {"__init__.py": SHOUT}, "shout = shoutplug")


def test_list_credits_no_builtin_to_a_loaded_plugin(tmp_path: Path, testtime_process) -> None:
    """`testtime --plugin shout.py list` once listed majority, rsa, single and trt as the plugin's: its register
    loaded the built-ins while it was the plugin loading."""
    plugin = _plugin(tmp_path, SHOUT, "shout.py")
    for env, args in (({}, ("--plugin", str(plugin))), (_installed(tmp_path), ())):
        listed = testtime_process(*args, "list", env={**env, "COLUMNS": "400"})
        assert listed.returncode == 0, listed.stderr
        rows = [line for line in listed.stdout.splitlines() if line.startswith("│ method")]
        credited = [line.split("│")[2].strip() for line in rows if "(plugin" in line]
        assert credited == ["shout"], rows


def test_an_installed_method_plugin_leaves_the_projects_own_tests_green(tmp_path: Path) -> None:
    """The suite's tests of the built-ins (every method's plan, the registry's built-in names) with a method
    plugin installed: they once failed by the dozen (`METHODS.builtin_names()` was `['ttrl']`)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, **_installed(tmp_path)}
    env.pop("PYTEST_XDIST_WORKER", None)
    # another registry's lookup loads the plugins first (as `list` and the suite's earlier tests do)
    probe = "import testtime.benchmarks as b; b.load_benchmarks(); from testtime.methods import METHODS as M; "
    probe += "print(M.builtin_names())"
    names = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=root)
    assert "'majority'" in names.stdout and "'shout'" not in names.stdout, names.stdout + names.stderr
    suite = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib",
         "tests/methods/test_plan.py", "tests/core/test_registry.py"],
        env=env, capture_output=True, text=True, cwd=root, timeout=600,
    )  # fmt: skip
    assert suite.returncode == 0, suite.stdout[-3000:]


def test_the_plugin_bound_keeps_the_hosts_own_alarm(tmp_path: Path, monkeypatch) -> None:
    """Loading plugins from a program that has an alarm of its own (pytest-timeout, math-verify's timeouts) leaves
    that alarm pending, not cancelled."""
    import signal

    from testtime.core import plugins

    monkeypatch.setenv(plugins.ENV, str(_plugin(tmp_path, "X = 1\n", "quick.py")))
    monkeypatch.setattr(plugins, "_state", plugins._State())
    previous = signal.signal(signal.SIGALRM, lambda *_: None)
    try:
        signal.setitimer(signal.ITIMER_REAL, 50)
        plugins.load_plugins()
        pending, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 40 < pending <= 50 and plugins.loaded_plugins() == [str(tmp_path / "quick.py")]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_the_plugin_pages_selector_and_reward_do_what_the_page_says(tmp_path: Path, testtime_process) -> None:
    """docs/plugins.md's terse.py, as written there: the selector picks the shortest answer and a run records it;
    the reward pays agreement, halved past 200 characters, under a TRL name of its own."""
    import re
    import subprocess
    import sys

    page = (Path(__file__).resolve().parents[1] / "docs" / "plugins.md").read_text()
    source = re.search(r'```python title="terse.py"\n(.*?)```', page, re.S)
    assert source, "docs/plugins.md lost terse.py"
    plugin = _plugin(tmp_path, source[1], "terse.py")
    out = tmp_path / "run"
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(["\\boxed{123}", "\\boxed{7}", "\\boxed{45}", "\\boxed{7}"]))
    result = testtime_process(
        "run", "--plugin", str(plugin), "--method", "majority", "--selector", "shortest", "--n", "4", "--bench",
        "arith", "--limit", "2", "--model", f"fake:file:{replies}", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["prediction"] for r in records] == ["7", "7"]
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["confidence"] for p in predictions] == [0.5, 0.5]  # two of four said 7 (once reported 0.0)
    script = (
        f"from testtime.api import use_plugin_files\nuse_plugin_files([{str(plugin)!r}])\n"
        "from testtime.rewards import reward_function\nr = reward_function('terse')\n"
        "long = 'x' * 300 + ' \\\\boxed{4}'\n"
        "print(r.__name__, r(completions=['\\\\boxed{4}', long, '\\\\boxed{5}'], prompts=['q'] * 3))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" ", 1) == ["testtime_terse", "[1.0, 0.5, 0.0]\n"]


def test_each_reward_function_has_its_own_name_in_trl() -> None:
    from testtime.rewards import majority_reward, reward_function

    names = [
        majority_reward.__name__,
        reward_function("majority", domain="text").__name__,
        reward_function("majority", selector="exclusivity").__name__,
        reward_function("majority", seed=3).__name__,
        reward_function("random", random_p=0.25).__name__,
    ]
    assert names[0] == "testtime_majority" and len(set(names)) == len(names), names


def test_the_plugin_pages_plan_says_what_its_method_will_do(tmp_path: Path, testtime_process) -> None:
    """docs/plugins.md's `critic.py`, as written there: its plan declares both kinds of call it makes (the
    critique greedy, whatever the run's temperature), it refuses a stream in one line, and a run of it ledgers its
    critiques with the sampling the manifest records."""
    from tests.helpers import docs_plugin

    plugin = docs_plugin("critic.py", tmp_path)
    out = tmp_path / "run"
    done = testtime_process(
        "run", "--plugin", str(plugin), "--method", "critic", "--bench", "arith", "--limit", "2",
        "--model", "fake:echo", "--temperature", "0.2", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["effective"]["sampling"]["critique"]["temperature"] == 0.0
    assert config["effective"]["sampling"]["solve"]["temperature"] == 0.2
    critiques = [e for e in read_entries(out / "ledger.jsonl") if e.purpose == "critique"]
    assert sorted(e.problem_id for e in critiques) == ["arith-d2-0", "arith-d2-1"]
    streamed = testtime_process(
        "run", "--plugin", str(plugin), "--method", "critic", "--bench", "arith", "--limit", "2", "--stream",
        "--model", "fake:echo", "--out", str(tmp_path / "stream"),
    )  # fmt: skip
    assert streamed.returncode == 2 and streamed.stderr.strip().endswith("critic answers a batch, not a stream")
