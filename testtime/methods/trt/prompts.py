"""TRT prompt templates, one place. Structure follows the paper and released code (trt.md §3–5); wording ours."""

from __future__ import annotations

STRATEGIES = """Before solving the problem below, plan {k} genuinely different approaches to it.

### Problem
{problem}

Return only a JSON list of {k} objects, each {{"key_technique": "...", "what_to_try": "..."}}: the main idea, \
and concretely what to try first. Make them differ in method, not in wording."""
"""Round 0: K distinct strategies from the problem alone (JSON; parsed leniently, see parsing.py)."""

KNOWLEDGE = """### Lessons from earlier attempts (they may be wrong or too general; weigh them)
{items}"""
"""The rendered knowledge list, inserted into solver prompts when it is not empty."""

STRATEGY = """### Suggested strategy
Key technique: {key_technique}
What to try: {what_to_try}"""
"""One rollout's own strategy."""

MATH_INCUMBENT = """### Earlier answer (may be wrong)
An earlier attempt concluded: {answer}
Its summary:
{summary}

Solve the problem from scratch first; do not trust the earlier attempt. Then compare. If your answer differs, \
write a section starting with "[Error Report]" that says "The answer cannot be {answer} because ..." with the \
concrete mistake; if you agree, write "[Error Report] N/A"."""
"""Math rounds ≥ 1: the incumbent's answer and summary (the reference's "Reference Solution"), and the
refutation format the exclusivity selector reads."""

MATH_SUMMARY = """End with a section starting with "[Summary]": a step-by-step summary of your solution, \
including where it may have gone wrong; then give your final answer in \\boxed{}."""
"""Every math round: the summary the next round is shown, as the reference asks for."""

WRONG_ANSWERS = """### Wrong answers (refuted by earlier attempts, with their reasons; do not repeat one without a \
new reason)
{items}"""
"""Math: the wrong-answer list, kept apart from the knowledge list."""


REFLECT = """You are improving a solver by studying its attempts at one problem.

### Problem
{problem}

### Selected attempt
{selected}

### Other attempts
{others}
{evidence}
### Current lessons
{knowledge}

Compare each other attempt with the selected one. Write only concrete, standalone lessons that would stop a \
future attempt from repeating an observed mistake (what went wrong, and the input or step that exposes it); \
no generic advice, never "attempt 2". Then plan {k} new strategies: refine what worked, pivot away from what \
failed.

Return only a JSON object: {{"insights": ["Do not ..."], "deactivate": <id of a lesson that proved wrong, or \
null>, "strategies": [{{"key_technique": "...", "what_to_try": "..."}}]}}"""
"""After selection: pairwise comparison → "don't" insights, at most one deactivation, K new strategies."""

CODE_EVIDENCE = """
### Test results (inputs written by the model; expected outputs unknown)
{report}
"""
"""Code rounds: the execution selector's per-candidate test report, for the reflection."""
