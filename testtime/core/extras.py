"""Optional features and the extras that bring them: a missing one is a one-line error naming the pip command.

The core install (`pip install testtime`) serves API runs (litellm:, openai:) with no torch; each heavier
feature lives in an extra (docs/getting-started.md, "Installs"). Checks look for the modules without importing them.
"""

from __future__ import annotations

import importlib.util

from testtime.core.errors import UserError

EXTRAS = {
    "local": "local models (hf:, the embedded default) and converting the embedded weights",
    "train": "TTRL with TRL on one node",
    "verl": "TTRL with verl on a cluster",
    "vllm": "the vllm: backend on a GPU box (on CPU: bash scripts/install --vllm)",
    "hub": "benchmarks loaded from the Hugging Face hub (without --data-dir)",
    "inspect": "testtime export --format inspect",
}


def missing(*modules: str) -> list[str]:
    return [module for module in modules if importlib.util.find_spec(module) is None]


def require(feature: str, extra: str, *modules: str) -> None:
    """UserError unless every module is importable: `<feature> needs <modules>: pip install 'testtime[<extra>]'`."""
    if absent := missing(*modules):
        raise UserError(f"{feature} needs {', '.join(absent)}: pip install 'testtime[{extra}]'")
