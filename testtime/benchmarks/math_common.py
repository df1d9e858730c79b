"""The built-in math benchmarks: the dataset loader (`dataset.py`) with a preset mapping — `<data-dir>/<name>.jsonl`
with `id`, `problem`, `answer`, else the public hub dataset with its own field names — and every row labelled.

Grading uses the same `core.answers` relation as voting and TTRL's reward (architecture invariant 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from testtime.benchmarks.base import data_dir
from testtime.benchmarks.dataset import INSTRUCTION, Dataset, DatasetOptions, graded_answer
from testtime.core.errors import UserError
from testtime.core.options import Options

__all__ = ["INSTRUCTION", "MathBenchmark", "graded_answer"]


class MathBenchmark(Dataset):
    """A JSONL/hub math set. Subclasses name the hub dataset and how its fields map."""

    Options = Options  # a built-in set takes no mapping: its preset is fixed
    hub_id: str
    hub_split = "test"
    hub_fields: tuple[str, str, str | None] = ("problem", "answer", None)  # problem, answer, id
    kept_metadata: ClassVar[tuple[str, ...]] = ("source", "subject", "level", "url")
    require_labels = True

    def __init__(self, data_dir: str | Path | None = None, **options: Any) -> None:
        folder = self._folder(data_dir)
        if folder is not None and not (folder / f"{self.name}.jsonl").is_file():
            problem, answer, id_field = self.hub_fields
            fields = ", ".join(f"`{f}`" for f in (id_field or "its index", problem, answer))
            raise UserError(
                f"{folder / f'{self.name}.jsonl'} does not exist: --bench {self.name} read offline is that file, one "
                f"JSON object a line with `id`, `problem` and `answer` (the hub's {self.hub_id}, split "
                f"{self.hub_split}, has {fields}); from a downloaded copy of it, run the copy itself: --bench "
                f"COPY.parquet{f' --bench-opt id={id_field}' if id_field else ''} --bench-opt problem={problem} "
                f"--bench-opt answer={answer} (docs/own-data.md)"
            )
        if folder is not None:
            source, preset = (
                str(folder / f"{self.name}.jsonl"),
                DatasetOptions(problem="problem", answer="answer", id="id"),
            )
        else:
            problem, answer, id_field = self.hub_fields
            source = f"hf:{self.hub_id}"
            preset = DatasetOptions(problem=problem, answer=answer, id=id_field, split=self.hub_split)
        try:
            super().__init__(data_dir, source=source, preset=preset.model_copy(update={"domain": "math"}), **options)
        except UserError as exc:
            if folder is not None:
                raise
            raise UserError(
                f"{exc}; offline? give --data-dir (or TESTTIME_DATA_DIR) a folder holding {self.name}.jsonl"
            ) from None

    @staticmethod
    def _folder(explicit: str | Path | None) -> Path | None:
        return data_dir(explicit)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "hub_id": self.hub_id}
