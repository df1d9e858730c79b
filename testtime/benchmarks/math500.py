"""`math500`: MATH-500, the PRM800K test split of MATH.

Hub: `HuggingFaceH4/MATH-500` (test split); local: `<data-dir>/math500.jsonl`.
"""

from testtime.benchmarks.base import BENCHMARKS
from testtime.benchmarks.math_common import MathBenchmark


@BENCHMARKS.register("math500", help="MATH-500, the PRM800K test split of MATH")
class Math500(MathBenchmark):
    hub_id = "HuggingFaceH4/MATH-500"
    hub_split = "test"
    hub_fields = ("problem", "answer", "unique_id")
