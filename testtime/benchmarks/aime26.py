"""`aime26`: AIME 2026 I+II (30 integer answers, 0–999), as MathArena evaluates it.

Hub: `MathArena/aime_2026` (its only split, `train`; fields `problem_idx`, `problem`, `answer` as an integer);
local: `<data-dir>/aime26.jsonl` with `id`, `problem`, `answer`.
"""

from testtime.benchmarks.base import BENCHMARKS
from testtime.benchmarks.math_common import MathBenchmark


@BENCHMARKS.register("aime26", help="AIME 2026 I+II (30 integer answers; MathArena's set)")
class Aime26(MathBenchmark):
    hub_id = "MathArena/aime_2026"
    hub_split = "train"
    hub_fields = ("problem", "answer", "problem_idx")
