"""The symbolic-equivalence worker process: reads `[a, b]` JSON lines on stdin, writes `1`/`0` lines.

Run as `python -m testtime.core.answers.symbolic_worker` by `equivalence._SymbolicWorker`. Each line carries
its check's CPU budget: the worker sets its own RLIMIT_CPU to the CPU it has used plus the budget (whole seconds),
so the kernel ends it (SIGXCPU) past the bound even inside sympy's C code, and the parent replaces it. CPU time,
not wall time: a loaded machine stretches the one and not the other. math-verify's own `signal.alarm` timeouts
are off: they only work on a main thread, and would count wall time.
"""

from __future__ import annotations

import json
import logging
import math
import resource
import sys


def bound_cpu(budget: float) -> None:
    """End this process once it has spent `budget` more CPU seconds (the kernel's SIGXCPU, whole seconds)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    limit = math.ceil(used.ru_utime + used.ru_stime + budget)
    resource.setrlimit(resource.RLIMIT_CPU, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))


def main() -> None:
    logging.disable(logging.WARNING)  # math-verify warns on every call that its own timeouts are off
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    configs = [LatexExtractionConfig(), ExprExtractionConfig()]
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # ended by SIGXCPU: no core file left behind
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        a, b, budget = json.loads(line)
        bound_cpu(float(budget))
        try:
            pa = parse(f"${a}$", extraction_config=configs, parsing_timeout=None)
            pb = parse(f"${b}$", extraction_config=configs, parsing_timeout=None)
            same = bool(pa and pb and (verify(pa, pb, timeout_seconds=None) or verify(pb, pa, timeout_seconds=None)))
        except Exception:  # noqa: BLE001 - an unparsable answer is simply not equivalent
            same = False
        sys.stdout.write("1\n" if same else "0\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
