"""`hmmt-feb25`: HMMT February 2025 (30 problems, LaTeX answers), as MathArena evaluates it.

Hub: `MathArena/hmmt_feb_2025` (train split; fields `problem_idx`, `problem`, `answer`); local:
`<data-dir>/hmmt-feb25.jsonl` with `id`, `problem`, `answer`.
"""

from testtime.benchmarks.base import BENCHMARKS
from testtime.benchmarks.math_common import MathBenchmark


@BENCHMARKS.register("hmmt-feb25", help="HMMT February 2025 (30 problems, LaTeX answers; MathArena's set)")
class HmmtFeb25(MathBenchmark):
    hub_id = "MathArena/hmmt_feb_2025"
    hub_split = "train"
    hub_fields = ("problem", "answer", "problem_idx")
