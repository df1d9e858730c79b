"""testtime: make a language model better at a set of problems at test time, without labels.

Importing the package is cheap on purpose: torch, transformers and litellm are imported only by the
backends that need them, so `testtime --help` and the fake model stay fast.
"""

from typing import Any

__version__ = "0.1.0"


def load_runs(*paths: Any) -> Any:
    """Runs (or folders of runs) as a pandas DataFrame, one row per (run, problem); see `experiments.runs`."""
    from testtime.experiments.runs import load_runs as load

    return load(*paths)
