"""`reflect`: a reflective pseudo-label (SR-TTRL, ICML 2026), weight-free. The vote's samples are grouped into
classes of equivalent answers; one representative per class (the class's first sample, its last `excerpt_chars`
characters, classes in the order they first appeared) goes into one greedy call of its own kind (`reflect`), and
the model answers with the answer it judges right as `\\boxed{ANSWER}`. That answer's class is the label; a reply
that names no class (nothing boxed, or an answer no sample gave) falls back to the majority, and says so.

Departures from SR-TTRL, stated: the class sizes are not shown unless `show_sizes=true` (the counts invite the
majority back, which is what the reflection is meant to second-guess); the representative is the class's first
sample, not a chosen one; one call, greedy, at the run's token cap. With one class there is nothing to reflect on,
and no call is made. Recorded (`ReflectionEvidence`): the majority's answer, the reflection's, whether they
differ, whether it fell back, and the reply.
"""

from __future__ import annotations

from collections.abc import Sequence

from testtime.core.answers import extract_answer
from testtime.core.answers.equivalence import equivalent
from testtime.core.options import Options, flag
from testtime.core.records import Candidate, Message, Problem, SamplingParams
from testtime.core.selection import ReflectionEvidence, Selection, VoteEvidence
from testtime.selectors import SELECTORS, SelectionContext, Selector
from testtime.selectors.majority import MajoritySelector

PROMPT = (
    "Problem:\n{problem}\n\nSeveral attempts at this problem ended with different final answers. How each one "
    "ended:\n\n{attempts}\n\nWhich final answer is correct? Check each ending against the problem, then give "
    "the correct final answer as \\boxed{{ANSWER}}."
)
ATTEMPT = "Attempt {label} (final answer: {answer}{size}):\n...{ending}"
REPLY_KEPT = 2000


class ReflectOptions(Options):
    excerpt_chars: int = flag(600, "each class's representative is shown by its last N characters", ge=50)
    show_sizes: bool = flag(False, "also show how many samples gave each answer (SR-TTRL does not)")


@SELECTORS.register(
    "reflect", help="math: one greedy reflection over one sample per answer class picks the label; else majority"
)
class ReflectSelector(Selector):
    Options = ReflectOptions
    options: ReflectOptions
    domains = frozenset({"math"})

    def call_kinds(self) -> tuple[str, ...]:
        return ("reflect",)

    def call_sampling(self, base: SamplingParams) -> dict[str, SamplingParams]:
        return {"reflect": base.model_copy(update={"temperature": 0.0, "top_p": 1.0})}

    def vote_classes(self, problem: Problem, answers: Sequence[str | None]) -> list[list[int]]:
        return MajoritySelector().vote_classes(problem, answers)

    async def select(self, problem: Problem, candidates: Sequence[Candidate], ctx: SelectionContext) -> Selection:
        majority = await MajoritySelector().select(problem, candidates, ctx)
        evidence = majority.evidence
        clusters = evidence.clusters if isinstance(evidence, VoteEvidence) else ()
        by_index = {c.index: c for c in candidates}
        shown = sorted((members[0] for members in clusters), key=lambda i: [c.index for c in candidates].index(i))
        record = ReflectionEvidence(clusters=clusters, shown=tuple(shown), majority_answer=majority.answer)
        if len(clusters) < 2 or ctx.calls is None:
            why = "one answer class: nothing to reflect on" if clusters else "every candidate abstained"
            return self._labelled(majority, record.model_copy(update={"reason": why, "shown": ()}))
        attempts = "\n\n".join(
            ATTEMPT.format(
                label=chr(ord("A") + place) if place < 26 else str(place + 1),
                answer=by_index[index].answer,
                size=f", {len(next(m for m in clusters if index in m))} samples" if self.options.show_sizes else "",
                ending=(by_index[index].text or "")[-self.options.excerpt_chars :],
            )
            for place, index in enumerate(shown)
        )
        reply = await ctx.ask("reflect", [Message(role="user", content=PROMPT.format(problem=problem.statement,
                                                                                      attempts=attempts))])  # fmt: skip
        text = reply.text if reply is not None and reply.error is None else ""
        answer = extract_answer(text) if text else None
        chosen = next((m for m in clusters if equivalent(by_index[m[0]].answer, answer)), None) if answer else None
        record = record.model_copy(update={"reflected_answer": answer, "reply": text[-REPLY_KEPT:]})
        if chosen is None:
            why = "the reflection boxed no answer" if answer is None else f"the reflection's {answer!r} is no sample's"
            return self._labelled(majority, record.model_copy(update={"fell_back": True, "reason": why}))
        winner = clusters.index(chosen)
        first = by_index[chosen[0]]
        return majority.model_copy(
            update={
                "selector": self.name,
                "rule": "reflect(one per class, greedy)",
                "index": first.index,
                "answer": first.answer,
                "cluster": winner,
                "majority_ratio": len(chosen) / len(candidates),
                "tie": False,
                "evidence": record.model_copy(update={"differs": majority.cluster != winner}),
            }
        )

    def _labelled(self, majority: Selection, record: ReflectionEvidence) -> Selection:
        """The majority's choice, as this selector's (a fall-back, or nothing to reflect on)."""
        rule = f"reflect(majority: {record.reason})"
        return majority.model_copy(update={"selector": self.name, "rule": rule, "evidence": record})
