"""Free-form answers: the final reply, SQuAD's normalisation as the grading rule, and the similarity the medoid
ranks by."""

from __future__ import annotations

import pytest

from testtime.core.answers.freeform import final_reply, normalize_text, similarity, texts_match


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  Paris.  ", "Paris."),
        ("<think>it could be Lyon</think>\nParis", "Paris"),
        ("<think>still thinking", None),  # a trace that never closed said nothing yet
        ("   \n ", None),
    ],
)
def test_the_final_reply_is_what_follows_the_reasoning(text: str, expected: str | None) -> None:
    assert final_reply(text) == expected


def test_normalisation_drops_case_punctuation_articles_and_spacing() -> None:
    assert normalize_text("  The  Eiffel Tower, in “Paris”!  ") == "eiffel tower in paris"


@pytest.mark.parametrize(
    ("prediction", "label", "match"),
    [
        ("Paris.", "paris", True),
        ("The Beatles", "Beatles", True),
        ("It is Paris.", "Paris", False),  # exact after normalisation: nothing looser
        ("...", "", False),  # nothing left is no answer, and never matches an empty label
        ("George  Washington", "george washington", True),
    ],
)
def test_texts_match_is_exact_after_normalisation(prediction: str, label: str, match: bool) -> None:
    assert texts_match(prediction, label) is match


def test_similarity_is_one_for_equal_texts_zero_for_disjoint_and_ordered_between() -> None:
    assert similarity("the cat sat on the mat", "The cat sat on the mat!") == 1.0
    assert similarity("the cat sat", "dogs bark loudly") == 0.0
    near = similarity("the cat sat on the mat", "the cat sat on a rug")
    far = similarity("the cat sat on the mat", "a rug lay under a cat")
    assert 0.0 < far < near < 1.0
    # same words in another order share unigrams, not bigrams: alike, but less than a paraphrase in order
    assert similarity("cat sat mat", "mat sat cat") == pytest.approx(0.5)
    assert similarity("Paris", "paris.") == 1.0  # one-word replies compare by their word
