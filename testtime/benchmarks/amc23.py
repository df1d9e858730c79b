"""`amc23`: AMC 2023, the 40-problem set of Qwen2.5-Math and TTRL (not the 83-problem AIMO set).

Hub: `math-ai/amc23` (test split); local: `<data-dir>/amc23.jsonl`.
"""

from testtime.benchmarks.base import BENCHMARKS
from testtime.benchmarks.math_common import MathBenchmark


@BENCHMARKS.register(
    "amc23", help="AMC 2023, the 40-problem set of Qwen2.5-Math and TTRL (not the 83-problem AIMO set)"
)
class Amc23(MathBenchmark):
    hub_id = "math-ai/amc23"
    hub_split = "test"
    hub_fields = ("question", "answer", "id")
