"""Label-free selection over free-form replies (prose, labels, lists): the replies themselves are the answers.

- `medoid`: the reply most like the others (mean `similarity` to every other candidate), no extra call. It is
  the sample-level analogue of a vote: where a majority class exists, its members are near one another.
- `usc`: universal self-consistency (Chen et al. 2023, arXiv 2311.17311): one extra call shows the model every
  reply and asks which is the most consistent with the rest ("The most consistent response is Response X");
  an unreadable or failed judgement falls back to the medoid, and says so. The call is in the ledger as its own
  purpose, `consistency`. Replies are data, never instructions to the judge: each is fenced in a
  `<response number="N">` block with its `<`, `>` and `&` escaped (no reply can forge a block), and numbered
  with distinct three-digit numbers drawn from a hash of the question and every reply (the paper numbers them
  0, 1, ...), so a reply that tells the judge to name "Response 2" names none, and the medoid chooses. Each
  reply and the whole prompt are capped (the evidence counts the replies cut), and only a number of at most
  three digits is read from the judgement.

Identical replies (after normalisation) form one class; a candidate with no reply abstains. The confidence
either implies is the chosen reply's mean similarity to the other candidates (abstained ones count 0).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence

from testtime.core.answers.freeform import Bags, final_reply, normalize_text
from testtime.core.ledger import CallPurpose
from testtime.core.options import Options, flag
from testtime.core.records import Candidate, Message, Problem, SamplingParams
from testtime.core.selection import CandidateScore, ConsistencyEvidence, Selection, SimilarityEvidence
from testtime.selectors import SELECTORS, SelectionContext, Selector

USC_PROMPT = """I have generated the following responses to the question: {question}

{responses}

Evaluate these responses.
Select the most consistent response based on majority consensus.
Start your answer with "The most consistent response is Response X" (without quotes)."""
RESPONSE_BLOCK = '<response number="{number}">\n{text}\n</response>'
REPLY_CHARS = 20_000  # each reply shown to the judge: its last characters (a reply's conclusion is at its end)
PROMPT_CHARS = 120_000  # the judge's whole prompt; past it every shown reply is cut to its share
LABELS = range(100, 1000)  # three-digit response numbers: a reply guessing one of n hits it at n/900
_PICKED = re.compile(r"most consistent response is\W{0,20}response\W{0,20}(\d+)", re.IGNORECASE)
_ANY = re.compile(r"response\W{0,20}(\d+)", re.IGNORECASE)


def reply_of(candidate: Candidate) -> str | None:
    """A candidate's free-form answer: its extracted answer on a text problem, else its final reply."""
    if candidate.error is not None:
        return None
    return candidate.answer if candidate.answer is not None else final_reply(candidate.text)


class Medoid:
    """The similarity matrix's summary for one set of candidates: who is most like the rest."""

    def __init__(self, candidates: Sequence[Candidate], replies: Sequence[str | None] | None = None) -> None:
        self.candidates = list(candidates)
        self.replies = list(replies) if replies is not None else [c.answer for c in candidates]
        answered = [i for i, r in enumerate(self.replies) if r is not None]
        bags = Bags([r or "" for r in self.replies])
        others = max(len(self.candidates) - 1, 1)
        self.mean: list[float | None] = [None] * len(self.replies)
        for i in answered:
            self.mean[i] = sum(bags.similarity(i, j) for j in answered if j != i) / others
        self.classes: dict[str, int] = {}
        self.class_of: list[int | None] = []
        for reply in self.replies:
            key = normalize_text(reply) if reply is not None else None
            if key is not None and key not in self.classes:
                self.classes[key] = len(self.classes)
            self.class_of.append(None if key is None else self.classes[key])
        # the most similar; equal means go to the largest class of identical replies, then the earliest
        sizes = [self.class_of.count(k) for k in range(len(self.classes))]
        self.best = max(answered, key=lambda i: (self.mean[i], sizes[self.class_of[i] or 0], -i), default=None)

    def confidence(self, position: int) -> float | None:
        return self.mean[position] if len(self.candidates) > 1 else None

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

    def similarity_evidence(self, position: int | None, reason: str | None = None) -> SimilarityEvidence:
        return SimilarityEvidence(
            mean_similarity=tuple(None if m is None else round(m, 6) for m in self.mean),
            confidence=None if position is None else self.confidence(position),
            reason=reason,
        )


def medoid_of(candidates: Sequence[Candidate], replies: Sequence[str | None] | None = None) -> Selection:
    """The medoid's `Selection` (`replies`: what to compare, default the candidates' answers)."""
    medoid = Medoid(candidates, replies)
    reason = None if medoid.best is not None else "no candidate replied"
    return medoid.selection("medoid", "medoid(token-f1)", medoid.best, medoid.similarity_evidence(medoid.best, reason))


@SELECTORS.register("medoid", help="free-form replies: the one most like the others (word-overlap F1); no extra call")
class MedoidSelector(Selector):
    name = "medoid"
    domains = frozenset({"text"})

    async def select(self, problem: Problem, candidates: Sequence[Candidate], ctx: SelectionContext) -> Selection:
        return medoid_of(candidates)


class USCOptions(Options):
    excerpt_chars: int | None = flag(
        None,
        "show the judge only each reply's last N characters (default: up to 20,000, the paper shows whole replies)",
        ge=1,
    )


@SELECTORS.register(
    "usc", help="free-form replies: universal self-consistency (one extra call picks the most consistent)"
)
class USCSelector(Selector):
    name = "usc"
    Options = USCOptions
    options: USCOptions
    domains = frozenset({"text"})

    def call_kinds(self) -> tuple[CallPurpose, ...]:
        return ("consistency",)

    async def select(self, problem: Problem, candidates: Sequence[Candidate], ctx: SelectionContext) -> Selection:
        medoid = Medoid(candidates)
        shown = [i for i, reply in enumerate(medoid.replies) if reply is not None]
        rule = "usc"
        if len(shown) < 2 or ctx.engine is None:  # nothing to judge: one reply (or none) is its own choice
            evidence = medoid.similarity_evidence(medoid.best, "fewer than two replies" if shown else "no reply")
            return medoid.selection(self.name, rule, medoid.best, evidence)
        texts = [medoid.replies[i] or "" for i in shown]
        labels = response_labels(problem.statement, texts)
        prompt, truncated = judge_prompt(problem.statement, texts, labels, self.options.excerpt_chars)
        [judged] = await ctx.engine.sample(
            [Message(role="user", content=prompt)],
            1,
            ctx.sampling.get("consistency") or ctx.params or SamplingParams(),
            problem_id=problem.id,
            purpose="consistency",
            step=ctx.step,
        )
        picked, fallback = _read_pick(judged.text, labels) if judged.error is None else (None, judged.error)
        position = shown[picked] if picked is not None else medoid.best
        evidence = ConsistencyEvidence(
            shown=tuple(candidates[i].index for i in shown),
            numbers=tuple(labels),
            reply=judged.text[-2000:],
            picked=picked,
            fallback=None if picked is not None else f"the medoid chose: {fallback}",
            confidence=None if position is None else medoid.confidence(position),
            truncated=truncated,
        )
        return medoid.selection(self.name, rule, position, evidence)


def response_labels(question: str, texts: Sequence[str]) -> list[int]:
    """Distinct three-digit numbers for the shown replies, drawn from a hash of the question and every reply:
    the same replies get the same numbers (a replay hits the cache), and no reply can know its own number or
    another's, since each number depends on every reply, its own included."""
    digest = hashlib.sha256("\x00".join([question, *texts]).encode("utf-8", "replace")).digest()
    return random.Random(digest).sample(LABELS, len(texts))


def judge_prompt(question: str, texts: Sequence[str], labels: Sequence[int], excerpt: int | None) -> tuple[str, int]:
    """The judge's prompt with each reply fenced and escaped, and how many replies were cut to fit the caps (each
    reply's, then its share of the whole prompt's, the question taking at most a quarter)."""
    asked = _escaped(question)[: PROMPT_CHARS // 4]
    share = (PROMPT_CHARS - len(USC_PROMPT) - len(asked)) // max(len(texts), 1) - len(RESPONSE_BLOCK)
    cap = min(excerpt or REPLY_CHARS, REPLY_CHARS, share)
    shown = [_escaped(text) for text in texts]
    blocks = [RESPONSE_BLOCK.format(number=n, text=text[-cap:]) for n, text in zip(labels, shown, strict=True)]
    return USC_PROMPT.format(question=asked, responses="\n".join(blocks)), sum(len(text) > cap for text in shown)


def _escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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
