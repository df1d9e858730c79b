"""`aime24`: AIME 2024 I+II (30 integer answers).

Hub: `HuggingFaceH4/aime_2024` (train split); local: `<data-dir>/aime24.jsonl`.
"""

from testtime.benchmarks.base import BENCHMARKS
from testtime.benchmarks.math_common import MathBenchmark


@BENCHMARKS.register("aime24", help="AIME 2024 I+II (30 integer answers)")
class Aime24(MathBenchmark):
    hub_id = "HuggingFaceH4/aime_2024"
    hub_split = "train"
    hub_fields = ("problem", "answer", "id")
