"""Free-form answers: a reply with no answer to extract (prose, a label, a list, a haiku) is its own answer.

- `final_reply`: the reply after its reasoning trace, stripped; None when empty or the trace never closes.
- `normalize_text`: the grading rule for free-form labels, SQuAD's (Rajpurkar et al. 2016): lower case,
  punctuation and the articles a/an/the dropped, whitespace collapsed. Two answers match when their
  normalised texts are equal; nothing looser (a judge model is a plugin's business, not a default's).
- `similarity`: how alike two replies are, without a model: the mean of the F1 of their normalised word
  unigrams and of their word bigrams (multisets). Unigrams measure shared content, bigrams shared phrasing;
  1.0 for equal texts, 0.0 for texts with no word in common. The medoid selector ranks replies by it.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

from testtime.core.answers.extract import strip_reasoning

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation + "“”‘’«»…–—")


def final_reply(text: str) -> str | None:
    """The reply a reader sees: after the reasoning trace, stripped; None when there is none."""
    final = strip_reasoning(text)
    if final is None:
        return None
    return final.strip() or None


def normalize_text(text: str) -> str:
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    lowered = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", lowered).split())


def texts_match(prediction: str, label: str) -> bool:
    """The free-form grading rule: equal after `normalize_text` (an empty normalisation never matches)."""
    normalized = normalize_text(prediction)
    return bool(normalized) and normalized == normalize_text(label)


def _f1(a: Counter[tuple[str, ...]], b: Counter[tuple[str, ...]]) -> float:
    common = sum((a & b).values())
    if common == 0:
        return 0.0
    precision, recall = common / sum(a.values()), common / sum(b.values())
    return 2 * precision * recall / (precision + recall)


def _grams(words: Sequence[str], size: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(words[i : i + size]) for i in range(len(words) - size + 1))


class Bags:
    """The unigram and bigram bags of each reply, built once for all pairs."""

    def __init__(self, texts: Sequence[str]) -> None:
        words = [normalize_text(t).split() for t in texts]
        self.unigrams = [_grams(w, 1) for w in words]
        self.bigrams = [_grams(w, 2) for w in words]

    def similarity(self, i: int, j: int) -> float:
        unigram = _f1(self.unigrams[i], self.unigrams[j])
        if not self.bigrams[i] and not self.bigrams[j]:  # two one-word replies: the unigrams say it all
            return unigram
        return (unigram + _f1(self.bigrams[i], self.bigrams[j])) / 2


def similarity(a: str, b: str) -> float:
    """Mean F1 of normalised word unigrams and bigrams: 1.0 equal, 0.0 nothing in common."""
    return Bags([a, b]).similarity(0, 1)
