"""Label-free selection over free-form replies (prose, labels, lists): the replies themselves are the answers.

- `medoid`: a vote over classes of equivalent replies, the chosen reply the most typical member of the largest
  class. The classes come from one judgement of the model (`agreement=judge`, the default: `agreement.py`), so
  paraphrases of one answer are one class and templated replies naming different answers are not; the
  confidence is the chosen class's share of the candidates. `agreement=words` (and the fallback, said in the
  evidence, where no model can be asked or the judgement names no group): identical replies after
  normalisation form a class, and the confidence is the chosen reply's mean word-overlap similarity to the
  others. Within a class, the most typical reply is the one most like the others (mean `similarity`).
- `usc`: universal self-consistency (Chen et al. 2023, arXiv 2311.17311): one extra call shows the model every
  reply and asks which is the most consistent with the rest ("The most consistent response is Response X");
  an unreadable or failed judgement falls back to the medoid, and says so. The call is in the ledger as its own
  purpose, `consistency`. Replies are data, never instructions to the judge: each is fenced in a
  `<response number="N">` block with its `<`, `>` and `&` escaped (no reply can forge a block), and numbered
  with distinct three-digit numbers drawn from a hash of the question and every reply (the paper numbers them
  0, 1, ...), so a reply that tells the judge to name "Response 2" names none, and the medoid chooses. Each
  reply and the whole prompt are capped (the evidence counts the replies cut), and only a number of at most
  three digits is read from the judgement. Its confidence (and the medoid's choice, where the judgement names
  no reply) comes from the medoid's classes: a second call groups the equivalent replies (`agreement=judge`,
  the default; the evidence says which classes were used), or identical replies (`agreement=words`, no call).

A candidate with no reply abstains (in no class; it counts 0 to the others' similarity).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from testtime.core.answers.freeform import Bags, final_reply, normalize_text
from testtime.core.options import Options, flag
from testtime.core.records import Candidate, Problem
from testtime.core.selection import CandidateScore, ConsistencyEvidence, Selection, SimilarityEvidence
from testtime.selectors import SELECTORS, SelectionContext, Selector
from testtime.selectors.agreement import PROMPT_CHARS, ask_judge, judge_prompt, judged_classes, response_labels

__all__ = ["PROMPT_CHARS", "Medoid", "medoid_of", "reply_of"]

USC_PROMPT = """I have generated the following responses to the question: {question}

{responses}

Evaluate these responses.
Select the most consistent response based on majority consensus.
Start your answer with "The most consistent response is Response X" (without quotes)."""
_PICKED = re.compile(r"most consistent response is\W{0,20}response\W{0,20}(\d+)", re.IGNORECASE)
_ANY = re.compile(r"response\W{0,20}(\d+)", re.IGNORECASE)


def reply_of(candidate: Candidate) -> str | None:
    """A candidate's free-form answer: its extracted answer on a text problem, else its final reply."""
    if candidate.error is not None:
        return None
    return candidate.answer if candidate.answer is not None else final_reply(candidate.text)


class Medoid:
    """The similarity matrix's summary for one set of candidates: who is most like the rest, and the classes of
    equivalent replies (judged ones where given, else identical replies)."""

    def __init__(
        self,
        candidates: Sequence[Candidate],
        replies: Sequence[str | None] | None = None,
        judged: Sequence[int] | None = None,
    ) -> None:
        self.candidates = list(candidates)
        self.replies = list(replies) if replies is not None else [c.answer for c in candidates]
        answered = [i for i, r in enumerate(self.replies) if r is not None]
        bags = Bags([r or "" for r in self.replies])
        others = max(len(self.candidates) - 1, 1)
        self.mean: list[float | None] = [None] * len(self.replies)
        for i in answered:
            self.mean[i] = sum(bags.similarity(i, j) for j in answered if j != i) / others
        self.judged = judged is not None
        keys = iter(judged or ())  # the judged classes follow the answered replies, in order
        self.classes: dict[str, int] = {}
        self.class_of: list[int | None] = []
        for reply in self.replies:
            key = None if reply is None else str(next(keys)) if judged is not None else normalize_text(reply)
            if key is not None and key not in self.classes:
                self.classes[key] = len(self.classes)
            self.class_of.append(None if key is None else self.classes[key])
        sizes = [self.class_of.count(k) for k in range(len(self.classes))]
        if self.judged:  # the largest judged class, then its most typical member, then the earliest
            rank = lambda i: (sizes[self.class_of[i] or 0], self.mean[i], -i)  # noqa: E731
        else:  # the most similar; equal means go to the largest class of identical replies, then the earliest
            rank = lambda i: (self.mean[i], sizes[self.class_of[i] or 0], -i)  # noqa: E731
        self.best = max(answered, key=rank, default=None)

    def confidence(self, position: int) -> float | None:
        """Judged: the chosen class's share of the candidates; words: the reply's mean similarity to the others."""
        if len(self.candidates) <= 1:
            return None
        if self.judged:
            return self.class_of.count(self.class_of[position]) / len(self.candidates)
        return self.mean[position]

    def selection(
        self, name: str, rule: str, position: int | None, evidence: SimilarityEvidence | ConsistencyEvidence
    ) -> Selection:
        scores = tuple(
            CandidateScore(index=c.index, cluster=self.class_of[i], score=self.mean[i] or 0.0)
            for i, c in enumerate(self.candidates)
        )
        if position is None:
            return Selection(selector=name, index=None, answer=None, rule=rule, scores=scores, evidence=evidence)
        cluster = self.class_of[position]
        size = self.class_of.count(cluster)
        return Selection(
            selector=name,
            index=self.candidates[position].index,
            answer=self.candidates[position].answer,
            rule=rule,
            cluster=cluster,
            cluster_sizes=tuple(self.class_of.count(k) for k in range(len(self.classes))),
            majority_ratio=size / len(self.candidates),
            scores=scores,
            evidence=evidence,
        )

    def similarity_evidence(
        self, position: int | None, reason: str | None = None, usable: bool | None = None
    ) -> SimilarityEvidence:
        return SimilarityEvidence(
            mean_similarity=tuple(None if m is None else round(m, 6) for m in self.mean),
            confidence=None if position is None else self.confidence(position),
            reason=reason,
            agreement="judge" if self.judged else "words",
            judgement_usable=usable,
        )


def medoid_of(
    candidates: Sequence[Candidate], replies: Sequence[str | None] | None = None, why_words: str | None = None
) -> Selection:
    """The word-overlap medoid's `Selection` (`replies`: what to compare, default the candidates' answers);
    `why_words`: why the classes are not judged ones (recorded)."""
    return words_selection(Medoid(candidates, replies), why_words)


def words_selection(medoid: Medoid, why_words: str | None = None, usable: bool | None = None) -> Selection:
    """A word-overlap medoid's `Selection`, its evidence saying why the classes are not judged ones (`usable`:
    False where a judgement was asked and fell back)."""
    reason = why_words if medoid.best is not None else "no candidate replied"
    evidence = medoid.similarity_evidence(medoid.best, reason, usable)
    return medoid.selection("medoid", "medoid(token-f1)", medoid.best, evidence)


def judge_asked(words: Medoid, agreement: str) -> bool:
    """Whether `agreement_of` asks the model to group these replies (two or more different ones, judge asked)."""
    return agreement == "judge" and len(words.classes) >= 2


AGREEMENT_HELP = (
    "judge (one call: the model groups the replies that give the same answer) | words (identical replies, "
    "word-overlap confidence; no call)"
)


async def agreement_of(
    problem: Problem, words: Medoid, ctx: SelectionContext, agreement: str, excerpt: int | None = None
) -> tuple[Medoid, str | None]:
    """The classes of `words`' candidates: the model's judgement (`agreement=judge`), else `words` (identical
    replies), with why the classes are not judged ones (None where words were asked for, or nothing replied)."""
    answered = [r for r in words.replies if r is not None]
    if not judge_asked(words, agreement):  # words asked for; or one reply, or every reply the same
        return words, "the replies are one answer" if answered and agreement != "words" else None
    judged, why = await judged_classes(problem, answered, ctx, excerpt)
    return (Medoid(words.candidates, judged=judged), None) if judged is not None else (words, why)


class MedoidOptions(Options):
    agreement: Literal["judge", "words"] = flag("judge", AGREEMENT_HELP)


@SELECTORS.register(
    "medoid", help="free-form replies: a vote over the classes the model judges equivalent; its most typical reply"
)
class MedoidSelector(Selector):
    Options = MedoidOptions
    options: MedoidOptions
    domains = frozenset({"text"})

    def call_kinds(self) -> tuple[str, ...]:
        return ("consistency",) if self.options.agreement == "judge" else ()

    async def select(self, problem: Problem, candidates: Sequence[Candidate], ctx: SelectionContext) -> Selection:
        words = Medoid(candidates)
        asked = judge_asked(words, self.options.agreement) and ctx.calls is not None
        medoid, why_words = await agreement_of(problem, words, ctx, self.options.agreement)
        if medoid.judged:
            evidence = medoid.similarity_evidence(medoid.best, usable=True)
            return medoid.selection(self.name, "medoid(judged classes)", medoid.best, evidence)
        return words_selection(medoid, why_words, usable=False if asked else None)


class USCOptions(Options):
    excerpt_chars: int | None = flag(
        None,
        "show the judge only each reply's last N characters (default: up to 20,000, the paper shows whole replies)",
        ge=1,
    )
    agreement: Literal["judge", "words"] = flag(
        "judge",
        "the confidence's classes: judge (a second call groups the replies that give the same answer; the "
        "confidence is the chosen reply's class's share) | words (identical replies, word-overlap confidence)",
    )


@SELECTORS.register(
    "usc", help="free-form replies: universal self-consistency (one extra call picks the most consistent)"
)
class USCSelector(Selector):
    Options = USCOptions
    options: USCOptions
    domains = frozenset({"text"})

    def call_kinds(self) -> tuple[str, ...]:
        return ("consistency",)

    def planned_calls(self) -> int:
        return 2 if self.options.agreement == "judge" else 1  # the pick, then the grouping

    async def select(self, problem: Problem, candidates: Sequence[Candidate], ctx: SelectionContext) -> Selection:
        medoid = Medoid(candidates)
        shown = [i for i, reply in enumerate(medoid.replies) if reply is not None]
        rule = "usc"
        if len(shown) < 2 or ctx.calls is None:  # nothing to judge: one reply (or none) is its own choice
            evidence = medoid.similarity_evidence(medoid.best, "fewer than two replies" if shown else "no reply")
            return medoid.selection(self.name, rule, medoid.best, evidence)
        texts = [medoid.replies[i] or "" for i in shown]
        labels = response_labels(problem.statement, texts)
        excerpt = self.options.excerpt_chars
        prompt, truncated = judge_prompt(USC_PROMPT, problem.statement, texts, labels, excerpt)
        judged = await ask_judge(problem, prompt, ctx)
        picked, fallback = _read_pick(judged.text, labels) if judged.error is None else (None, judged.error)
        # The confidence, and the medoid's choice where the judgement names none, over classes of equivalent replies.
        grouping = judge_asked(medoid, self.options.agreement)
        classes, why_words = await agreement_of(problem, medoid, ctx, self.options.agreement, excerpt)
        position = shown[picked] if picked is not None else classes.best
        evidence = ConsistencyEvidence(
            shown=tuple(candidates[i].index for i in shown),
            numbers=tuple(labels),
            reply=judged.text[-2000:],
            picked=picked,
            fallback=None if picked is not None else f"the medoid chose: {fallback}",
            confidence=None if position is None else classes.confidence(position),
            agreement="judge" if classes.judged else "words",
            reason=why_words,
            truncated=truncated,
            judgement_usable=picked is not None and (classes.judged or not grouping),
        )
        return classes.selection(self.name, rule, position, evidence)


def _read_pick(text: str, labels: Sequence[int]) -> tuple[int | None, str]:
    """The position of the response the judgement names ('most consistent response is Response X', else the last
    'Response X' it mentions); None with why when it names none that was shown. Bounded: only a number of at most
    three digits is read, whatever the judgement holds."""
    found = _PICKED.findall(text) or _ANY.findall(text)
    if not found:
        return None, "the judgement names no response"
    digits = found[0] if _PICKED.search(text) else found[-1]
    if len(digits) > 3 or int(digits) not in labels:
        shown = ", ".join(map(str, labels))
        return None, f"the judgement names Response {digits[:12]}{'…' if len(digits) > 12 else ''}, not one of {shown}"
    return list(labels).index(int(digits)), ""
