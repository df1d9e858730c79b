"""Prompt templates for selectors, one place, each with a docstring saying what it asks for."""

from __future__ import annotations

TEST_INPUTS = """You are writing test inputs for the programming problem below. Several candidate programs \
disagree on it; write inputs that expose mistakes: edge cases, boundaries, tricky and maximal cases that \
still satisfy the constraints.

### Problem
{statement}

### Candidate programs
{programs}

Return only a JSON list of {count} test inputs. {input_format}"""
"""Asks for inputs only (the default): expected outputs the model guesses are weak evidence."""

TEST_CASES = """You are writing tests for the programming problem below. Several candidate programs \
disagree on it; write tests that expose mistakes: edge cases, boundaries, tricky cases that still satisfy \
the constraints, each with the output a correct program must produce.

### Problem
{statement}

### Candidate programs
{programs}

Return only a JSON list of {count} objects {{"input": ..., "output": ...}}. {input_format}"""
"""Asks for inputs with predicted outputs (`predicted_outputs=True`); agreement with them only breaks ties."""

UNIT_TESTS = """You are writing unit tests for the programming problem below, from its specification alone: \
typical cases, edge cases, boundaries and tricky cases that satisfy the constraints, each with the exact output \
a correct program must produce.

### Problem
{statement}

Return only a JSON list of {count} objects {{"input": ..., "output": ...}}. {input_format}"""
"""TRT's tests on code, as its paper describes its self-verification: unit tests with expected outputs written
from the specification, never shown the candidates; candidates then rank by the tests they pass."""

STDIN_FORMAT = "Each input is a string exactly as the program reads it from standard input."
FUNCTIONAL_FORMAT = (
    "Each input is a string holding one JSON value per line, one line per argument of `{func_name}`, in order."
)
