"""The code × test matrix (`--selector-opt rank=matrix`, after CoSPlay): every distinct program against every test
with an expected output (the public examples and the model's own unit tests, written from the specification),
judged on the host as the grader judges; programs and tests then score each other by pass counts.

The rule: a public example weighs 1 (it is part of the statement); a written test starts at 1. Three rounds of
  program score  = the weights of the tests it passes (summed)
  test weight    = the share of all program score carried by the programs that pass it
so a test no program passes weighs 0 (a wrong expected output, most likely), one that only a small minority of
the programs (by score) passes weighs little, and a program is credited most for the tests that the programs the
tests credit agree on. Programs rank by score; ties by behaviour agreement (the size of their class of programs
that behave alike), then the earliest.

Where it departs from CoSPlay: CoSPlay prunes programs and tests by pass counts in turn until they agree; here
both are weighed, nothing is dropped, and the weights converge in a fixed three rounds (a few programs and tests
a problem: more rounds change nothing measurable). The matrix, the weights and the scores are recorded per
selection (`ExecutionEvidence.matrix`).
"""

from __future__ import annotations

from collections.abc import Sequence

ROUNDS = 3


def mutual_scores(passes: Sequence[Sequence[bool]], public: int) -> tuple[list[float], list[float]]:
    """`passes[p][t]`: program p passes test t (the first `public` tests are the statement's examples). The
    programs' scores and the tests' weights after `ROUNDS` rounds of mutual scoring (the module's rule)."""
    tests = len(passes[0]) if passes else 0
    weights = [1.0] * tests
    scores = [0.0] * len(passes)
    for _ in range(ROUNDS):
        scores = [sum(w for w, ok in zip(weights, row, strict=True) if ok) for row in passes]
        total = sum(scores)
        for t in range(public, tests):
            carried = sum(score for score, row in zip(scores, passes, strict=True) if row[t])
            weights[t] = carried / total if total else 0.0
    scores = [sum(w for w, ok in zip(weights, row, strict=True) if ok) for row in passes]
    return [round(s, 6) for s in scores], [round(w, 6) for w in weights]
