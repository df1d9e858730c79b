"""The host's recursion-free JSON: the same values as json.loads, the same refusals, any depth."""

from __future__ import annotations

import json
import random

import pytest

from testtime.sandbox import deepjson


def _random_value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(7 if depth < 4 else 4)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randint(-(10**20), 10**20)
    if kind == 2:
        return rng.choice([0.5, -1e-300, 1.5e300, float("inf"), -2.0])
    if kind == 3:
        return "".join(rng.choice('ab"\\\n\u2028é😀') for _ in range(rng.randrange(5)))
    if kind in (4, 5):
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {str(rng.randrange(9)): _random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


@pytest.mark.parametrize("seed", range(5))
def test_parses_what_json_parses(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(200):
        text = json.dumps(_random_value(rng), indent=rng.choice([None, 1]))
        assert repr(deepjson.loads(text)) == repr(json.loads(text))
        assert deepjson.equal(deepjson.loads(text), json.loads(text))


@pytest.mark.parametrize("text", ["[1,]", '{"a" 1}', "[1 2]", "[", '{"a":1,}', "1 2", "", "]", "{1: 2}", "tru"])
def test_refuses_what_json_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        deepjson.loads(text)


def test_any_depth_parses_and_compares() -> None:
    deep = '{"k": ' * 20_000 + "[1]" + "}" * 20_000
    value = deepjson.loads(deep)
    assert deepjson.equal(value, deepjson.loads(deep))
    assert not deepjson.equal(value, deepjson.loads(deep.replace("[1]", "[2]")))


@pytest.mark.parametrize(
    ("encoded", "expected", "equal"),
    [
        ({"~t": [1, 2]}, [1, 2], True),  # a top-level tuple is a list
        ([{"~t": [1]}], [[1]], False),  # a nested one is not
        ({"~d": [["a", 1]]}, {"a": 1}, True),
        ({"~d": [[1, 1]]}, {"1": 1}, False),  # an int key is not a string key
        ({"~d": [["a", 1], ["a", 1]]}, {"a": 1, "b": 1}, False),
        ({"~s": [1]}, [1], False),
        ({"~f": "inf"}, float("inf"), True),
        ({"~f": "nan"}, float("nan"), False),
        ({"~r": "object"}, "object", False),
        ({"a": 1}, {"a": 1}, False),  # untagged: not the encoding of any returned value
        (True, 1, True),  # Python's own scalar rules
    ],
)
def test_official_comparison_of_the_exact_encoding(encoded: object, expected: object, equal: bool) -> None:
    assert deepjson.official_equal(encoded, expected) is equal
