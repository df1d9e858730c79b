"""Online TTRL's window: the last W arrivals, plus `replay` older ones drawn with a seed per update."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from testtime.core.errors import UserError
from testtime.core.records import Problem
from testtime.methods.ttrl.online import OnlineTTRL
from testtime.methods.ttrl.recipe import TTRLSettings


def learner(tmp_path: Path, **options: int) -> OnlineTTRL:
    # update 1 comes due after all 20 buffered arrivals
    settings = TTRLSettings.from_options({"preset": "cpu", "update_every": 20, **options})
    method = SimpleNamespace(settings=settings)
    engine = SimpleNamespace(model=SimpleNamespace(path="/weights"), model_name="hf:/weights")
    plan = SimpleNamespace(selector=object(), samples=8)
    online = OnlineTTRL(method, SimpleNamespace(engine=engine, workdir=tmp_path, seed=7, plan=plan))  # type: ignore[arg-type]
    online.buffer = [Problem(id=f"p{i}", domain="math", statement=str(i)) for i in range(20)]
    return online


def test_an_update_trains_on_the_latest_arrivals_and_a_seeded_draw_of_older_ones(tmp_path: Path) -> None:
    online = learner(tmp_path, window=4, replay=3)
    window = [p.id for p in online._window(1)]
    assert window[:4] == ["p16", "p17", "p18", "p19"]
    older = window[4:]
    assert len(older) == 3 and len(set(older)) == 3 and all(int(p[1:]) < 16 for p in older)
    assert [p.id for p in online._window(1)] == window  # the same draw after a resume
    assert [p.id for p in online._window(2)][4:] != older  # another update draws again


def test_no_replay_trains_on_the_window_alone_and_a_short_buffer_on_all_of_it(tmp_path: Path) -> None:
    assert [p.id for p in learner(tmp_path, window=2)._window(1)] == ["p18", "p19"]
    short = learner(tmp_path, window=8, replay=5)
    short.buffer = short.buffer[:3]
    assert [p.id for p in short._window(1)] == ["p0", "p1", "p2"]


def test_a_replay_has_no_weights_to_update(tmp_path: Path) -> None:
    method = SimpleNamespace(settings=TTRLSettings.from_options({"preset": "cpu"}))
    ctx = SimpleNamespace(engine=SimpleNamespace(model=None, model_name="hf:/w"), workdir=tmp_path, seed=0)
    with pytest.raises(UserError, match="cannot be replayed"):
        OnlineTTRL(method, ctx)  # type: ignore[arg-type]


def test_an_update_that_runs_late_trains_on_the_arrivals_it_came_due_at(tmp_path: Path) -> None:
    online = learner(tmp_path, window=4, update_every=8)  # 20 buffered: a server answered on while it waited
    assert [p.id for p in online._window(1)] == ["p4", "p5", "p6", "p7"]
    assert [p.id for p in online._window(2)] == ["p12", "p13", "p14", "p15"]
    assert online.due() == 2
    online.settings = online.settings.model_copy(update={"freeze": True})
    assert online.due() == 0  # frozen: the weights stay as they are
