"""testtime: make a language model better at a set of problems at test time, without labels.

The public Python API is `testtime.api` (its `__all__` lists what is supported); its names are also
reachable here (`testtime.run(...)`, `testtime.load_runs(...)`), and TRL reward functions are in
`testtime.rewards`. Importing the package is cheap on purpose: the API loads on first use, and torch,
transformers and litellm are imported only by the backends that need them.
"""

from importlib import import_module
from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    api = import_module("testtime.api")  # not `from testtime import api`: that asks this hook for `api` again
    if name in api.__all__:
        return getattr(api, name)
    raise AttributeError(f"module 'testtime' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted([*globals(), *import_module("testtime.api").__all__])
