"""Row-seeded sampling: each row's draws come from its own generator, however the rows are split among threads and
whatever else shares the batch (greedy rows, other temperatures)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from testtime.models.seeded import RowDraw, row_seeded_sampler  # noqa: E402


def _draws(threads: int, seeds: list[int], steps: int) -> list[list[int]]:
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        sampler = row_seeded_sampler([RowDraw(seed, 0.8, 0.9) for seed in seeds], device="cpu")
        scores = torch.Generator().manual_seed(7)
        drawn = []
        for _ in range(steps):
            logits = torch.randn(len(seeds), 5000, generator=scores)
            picked = sampler(torch.zeros(len(seeds), 1, dtype=torch.long), logits)
            assert bool(((picked == 0).sum(dim=1) == 1).all())  # exactly one token left open per row
            drawn.append(picked.argmax(dim=1).tolist())
        return drawn
    finally:
        torch.set_num_threads(previous)


def test_draws_are_the_same_on_one_thread_and_on_several() -> None:
    seeds = [11, 12, 13, 14, 15, 16, 17]  # seven rows: split unevenly among three threads
    assert _draws(1, seeds, 6) == _draws(3, seeds, 6)


def test_a_rows_draws_depend_on_its_seed_alone() -> None:
    """The same scores for seed 13 alone and as the middle row of three: the same draws, step after step."""
    alone = row_seeded_sampler([RowDraw(13)], "cpu")
    among = row_seeded_sampler([RowDraw(99), RowDraw(13), RowDraw(5)], "cpu")
    scores = torch.Generator().manual_seed(3)
    for _ in range(4):
        logits = torch.randn(1, 5000, generator=scores)
        one = alone(torch.zeros(1, 1, dtype=torch.long), logits).argmax(1).item()
        three = among(torch.zeros(3, 1, dtype=torch.long), logits.repeat(3, 1)).argmax(1)[1].item()
        assert one == three


def test_greedy_rows_and_other_settings_leave_a_rows_draws_alone() -> None:
    """Seed 13 at T=0.8 / top-p 0.9 alone, and beside a greedy row and a row at T=1.5: the same draws; the
    greedy row takes its highest score at every step."""
    mine = RowDraw(13, 0.8, 0.9)
    alone = row_seeded_sampler([mine], "cpu")
    mixed = row_seeded_sampler([RowDraw(None), mine, RowDraw(5, 1.5, 1.0)], "cpu")
    scores = torch.Generator().manual_seed(4)
    for _ in range(4):
        logits = torch.randn(3, 5000, generator=scores)
        picked = mixed(torch.zeros(3, 1, dtype=torch.long), logits).argmax(1)
        assert picked[1].item() == alone(torch.zeros(1, 1, dtype=torch.long), logits[1:2]).argmax(1).item()
        assert picked[0].item() == logits[0].argmax().item()
