"""The shared core: vocabulary, rollout fan-out, completion cache, ledger, run directory, answers.

`core` imports no other `testtime` package; everything else builds on it.
"""
