"""`aime25`: AIME 2025 I+II (30 integer answers).

Hub: `yentinglin/aime_2025` (train split); local: `<data-dir>/aime25.jsonl`.
"""

from testtime.benchmarks.base import BENCHMARKS
from testtime.benchmarks.math_common import MathBenchmark


@BENCHMARKS.register("aime25", help="AIME 2025 I+II (30 integer answers)")
class Aime25(MathBenchmark):
    hub_id = "yentinglin/aime_2025"
    hub_split = "train"
    hub_fields = ("problem", "answer", "id")
