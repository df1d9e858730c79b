"""`hmmt-feb25`, `hmmt-feb26`: HMMT February 2025 (30 problems) and 2026 (33), LaTeX answers, as MathArena
evaluates them.

Hub: `MathArena/hmmt_feb_2025`, `MathArena/hmmt_feb_2026` (their only split, `train`; fields `problem_idx`,
`problem`, `answer`); local: `<data-dir>/hmmt-feb25.jsonl`, `<data-dir>/hmmt-feb26.jsonl` with `id`, `problem`,
`answer`.
"""

from testtime.benchmarks.base import BENCHMARKS
from testtime.benchmarks.math_common import MathBenchmark


@BENCHMARKS.register("hmmt-feb25", help="HMMT February 2025 (30 problems, LaTeX answers; MathArena's set)")
class HmmtFeb25(MathBenchmark):
    hub_id = "MathArena/hmmt_feb_2025"
    hub_split = "train"
    hub_fields = ("problem", "answer", "problem_idx")


@BENCHMARKS.register("hmmt-feb26", help="HMMT February 2026 (33 problems, LaTeX answers; MathArena's set)")
class HmmtFeb26(HmmtFeb25):
    hub_id = "MathArena/hmmt_feb_2026"
