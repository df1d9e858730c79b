"""Row-seeded sampling: each row's draws come from its own generator, however the rows are split among threads."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from testtime.models.seeded import row_seeded_sampler  # noqa: E402


def _draws(threads: int, seeds: list[int], steps: int) -> list[list[int]]:
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        sampler = row_seeded_sampler(seeds, temperature=0.8, top_p=0.9, device="cpu")
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
    alone, among = row_seeded_sampler([13], 1.0, 1.0, "cpu"), row_seeded_sampler([99, 13, 5], 1.0, 1.0, "cpu")
    scores = torch.Generator().manual_seed(3)
    for _ in range(4):
        logits = torch.randn(1, 5000, generator=scores)
        one = alone(torch.zeros(1, 1, dtype=torch.long), logits).argmax(1).item()
        three = among(torch.zeros(3, 1, dtype=torch.long), logits.repeat(3, 1)).argmax(1)[1].item()
        assert one == three
