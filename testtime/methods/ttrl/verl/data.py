"""Problems as verl's RL parquet: one row per prompt, `reward_model.ground_truth` empty (sealed).

Row schema (verl's `RLHFDataset`, TTRL's `preprocess.py`): `data_source`, `prompt` (chat messages),
`ability`, `reward_model` {style, ground_truth}, `extra_info` {split, index, problem}. `problem` is the
`Problem` as JSON (statement and public examples: what a method may see), which the reward hook reads back.
TTRL trains on the test problems themselves, so train and validation files hold the same prompts; validation
scores are not computed by verl (it has no labels): evaluate the exported model with `testtime run` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from testtime.core.errors import UserError
from testtime.core.records import Message, Problem


def verl_rows(problems: Sequence[Problem], prompt: Callable[[Problem], list[Message]], source: str) -> list[dict]:
    return [
        {
            "data_source": source,
            "prompt": [{"role": m.role, "content": m.content} for m in prompt(p)],
            "ability": p.domain,
            "reward_model": {"style": "rule", "ground_truth": ""},  # TTRL writes the voted label at run time
            "extra_info": {"split": "test", "index": p.id, "problem": p.model_dump_json()},
        }
        for p in problems
    ]


def write_parquet(rows: list[dict], folder: Path) -> tuple[Path, Path]:
    """train.parquet and val.parquet (the same prompts, as in TTRL)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError("writing verl data needs pyarrow: pip install 'testtime[verl]'") from None
    if not rows:
        raise UserError("no problems to write")
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows)
    train, val = folder / "train.parquet", folder / "val.parquet"
    pq.write_table(table, train)
    pq.write_table(table, val)
    return train, val
