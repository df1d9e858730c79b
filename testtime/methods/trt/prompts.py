"""TRT prompt templates, one place. Structure follows the paper and released code (trt.md §3–5); wording ours."""

from __future__ import annotations

STRATEGIES = """Before solving the problem below, plan {k} genuinely different approaches to it.

### Problem
{problem}

Return only a JSON list of {k} objects, each {{"key_technique": "...", "what_to_try": "..."}}: the main idea, \
and concretely what to try first. Make them differ in method, not in wording."""
"""Round 0: K distinct strategies from the problem alone (JSON; parsed leniently, see parsing.py). The generic
prompt, as TRT ran before its strategies were domain-specific (`strategy_prompts=generic`)."""

STRATEGY_KINDS = {
    "math": "proof and problem-solving techniques: casework, invariants and monovariants, working backwards, "
    "symmetry, substitution, counting in two ways, extremal arguments, coordinates, modular arithmetic, "
    "generating functions, contradiction",
    "code": "algorithmic paradigms: greedy, dynamic programming, divide and conquer, two pointers or sliding window, "
    "binary search on the answer, graph search (BFS, DFS, shortest paths), union-find, prefix sums, sorting with "
    "a sweep, number theory, brute force with pruning",
    "text": "ways of answering: recall the fact directly, reason from definitions, eliminate the alternatives, "
    "check the answer against the question's wording",
}
"""The paradigms each domain's strategies are drawn from, as the TRT paper describes them (trt.md)."""

DOMAIN_STRATEGIES = """Before solving the problem below, plan {k} genuinely different approaches to it, each built on \
a different one of the {kinds}.

### Problem
{problem}

Return only a JSON list of {k} objects, each {{"key_technique": "...", "what_to_try": "..."}}: the technique \
by name, and concretely what to try first with it on this problem. Make them differ in method, not in wording."""
"""Round 0, the default (`strategy_prompts=domain`): strategies drawn from the domain's paradigms."""

KNOWLEDGE = """### Lessons from earlier attempts (they may be wrong or too general; weigh them)
{items}"""
"""The rendered knowledge list, inserted into solver prompts when it is not empty."""

MEMORY = """### Lessons from earlier problems (each learned on another problem; apply one only where it fits)
{items}"""
"""memory=shared: lessons other problems' reflections distilled, inserted before this problem's own."""

GENERALISE = """Lessons learned while solving one problem:
{lessons}

### The problem they were learned on
{problem}

Rewrite each lesson so that it would help on a different problem of the same kind: drop this problem's own \
numbers and names. Leave out a lesson that only makes sense for this problem.

Return only a JSON list of strings (an empty list when no lesson generalises)."""
"""memory=shared: after a problem, its lessons made general before they join the memory across problems."""

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

WRONG_ANSWERS = """### Wrong answers (rejected: the refutations outweigh the attempts that reached them; do not \
repeat one without a new reason)
{items}"""
"""Math: the answers the selection rejected, with their reasons, kept apart from the knowledge list."""

DISPUTED = """### Disputed answers (some attempts refuted them, as many or more reached them; weigh the reasons)
{items}"""
"""Math: answers refuted but still standing (never the current answer), so no prompt contradicts the choice."""

RELEASED_FIRST = """

Solve this problem carefully, step by step.

Write exactly these sections, with the square brackets:
[Summary]: one paragraph recording every reasoning step and calculation, where you might have gone wrong, \
and the final answer you reached.
[Answer]: the final answer as \\boxed{{<integer>}}."""
"""Released preset, round 1: the problem and its output sections (trt.md §3; wording ours)."""

RELEASED_REFINE = """

Solve this problem carefully, from scratch first, with sound logic rather than heuristics. Only then compare \
your work with the Wrong Answer List and the reference solution, and decide which is right.

## Reference Solution
{reference}

## Wrong Answer List
{wrong}

Write exactly these sections, with the square brackets:
[Error Report]: if your solution differs from the recalled ones, explain in detail, on its own, why the old \
answer is wrong: begin with "The answer cannot be <integer>, because..." and end with "The correct approach \
is ...", without stating the answer you reached; write "N/A" if you agree with the recalled solution.
[Summary]: one detailed paragraph recording every reasoning step and the final answer you reached, on its own.
[Answer]: the final answer as \\boxed{{<integer>}}."""
"""Released preset, later rounds: the earlier round's summary only (never its answer), every dropped answer's
reason, and the error-report contract the drop rule reads (trt.md §3; wording ours)."""


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
### Test runs (public examples have expected outputs; the model-written inputs have none, so each attempt's \
output there is compared with the selected attempt's)
{report}
"""
"""Code rounds: the execution selector's runs per attempt (`code_evidence.py`), for the reflection."""
