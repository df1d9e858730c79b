"""The registries: `import testtime` alone lists every built-in, whichever built-in module a user imports first;
a plugin may use a built-in while it loads; an installed plugin never turns the project's own tests red."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_plugins import _plugin


def test_import_alone_lists_the_builtins_and_a_plugin_may_use_one_while_it_loads(tmp_path: Path) -> None:
    """`import testtime`, nothing else: every registry lists its built-ins; a plugin that builds a built-in
    selector as it loads gets it, and leaves no run folder behind."""
    uses = "from testtime.api import SELECTORS\nMAJORITY = SELECTORS.create('majority')\n"
    plugin = _plugin(tmp_path, uses, "uses.py")
    script = textwrap.dedent(
        f"""
        import testtime
        print(testtime.SELECTORS.names(), testtime.METHODS.names(), testtime.BENCHMARKS.names())
        testtime.use_plugin_files([{str(plugin)!r}])
        testtime.load_plugins()
        import sys
        print(sys.modules[[m for m in sys.modules if m.startswith("testtime_plugin_uses")][0]].MAJORITY.name)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    listed, made = done.stdout.splitlines()
    assert "'majority'" in listed and "'trt'" in listed and "'arith'" in listed and made == "majority"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["uses.py"]


def test_an_installed_plugin_does_not_break_the_projects_own_contract_tests(tmp_path: Path) -> None:
    """The selector contract tests check the built-ins: a plugin selector they know nothing of (present for
    every process, as an installed package's would be) leaves them green."""
    env = {**os.environ, "TESTTIME_PLUGINS": str(_plugin(tmp_path))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/selectors/test_contract.py", "-x"],
        capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parents[2], timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout


def _builtin_modules() -> list[str]:
    from testtime.api import BENCHMARKS, METHODS, MODELS, SELECTORS
    from testtime.sandbox import SANDBOXES

    return [m for registry in (METHODS, SELECTORS, BENCHMARKS, MODELS, SANDBOXES) for m in registry.builtins]


@pytest.mark.parametrize("module", _builtin_modules())
def test_any_builtin_module_imported_first_leaves_every_registry_whole(module: str) -> None:
    """A built-in's own registration must not import its siblings (a half-imported module's names are not yet
    there): whichever a user imports first, every registry then lists all its built-ins."""
    script = (
        f"import {module}, testtime\n"
        "print([len(r.names()) for r in (testtime.METHODS, testtime.SELECTORS, testtime.BENCHMARKS, testtime.MODELS)])"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    from testtime.api import BENCHMARKS, METHODS, MODELS, SELECTORS

    assert done.stdout.strip() == str([len(r.builtin_names()) for r in (METHODS, SELECTORS, BENCHMARKS, MODELS)])
