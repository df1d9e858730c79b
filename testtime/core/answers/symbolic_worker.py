"""The symbolic-equivalence worker process: reads `[a, b]` JSON lines on stdin, writes `1`/`0` lines.

Run as `python -m testtime.core.answers.symbolic_worker` by `equivalence._SymbolicWorker`, which bounds
each check's wall time and replaces the process when one hangs. math-verify's own `signal.alarm`
timeouts are off: they only work on a main thread and the parent already enforces the bound.
"""

from __future__ import annotations

import json
import logging
import sys


def main() -> None:
    logging.disable(logging.WARNING)  # math-verify warns on every call that its own timeouts are off
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    configs = [LatexExtractionConfig(), ExprExtractionConfig()]
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    for line in sys.stdin:
        a, b = json.loads(line)
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
