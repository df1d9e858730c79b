"""The one migration from run directories written before records were versioned (schema 1: no
`schema_version` in config.json) to the current schema. Readers call these on raw JSON before validating it;
nothing else in the code knows an older shape.

What changed, file by file (docs/records.md, "Reading run directories"):
- config.json: `schema_version`, `kind`, `effective` (null: not recorded then) and `resumed` added;
  `run.api_base` was a string or null before fleets. Any config.json without `run.seeds` (schema 2 included)
  was written when every problem's sample i had one seed: it reads as `seeds: shared`, so its cache replays.
  A TRT run recorded without `strategy_prompts` asked the generic strategy prompt (it reads with
  `strategy_prompts: generic`); one on code whose recorded execution selector has no `rank` chose by behaviour
  agreement (`selector_options.rank: agreement`): each resumes and replays as it ran.
- summary.json: `pass@1_avg` is `pass@1`; `rounds.rollout_mean` is `rounds.pass@1`; the ledger's
  `cost_known: false` is `cost_usd: null` with `known_cost_usd` beside it; an accuracy or training FLOPs that
  measured nothing is null, not 0.
- results.jsonl: `id` was `problem_id` in the first runs; rounds and TTRL records sat under `details`;
  refutations were listed as `rejected` (dicts with reasons); selection evidence was untagged.
- rounds.jsonl (TRT checkpoints): the state's refutations were `rejected`; records as in results.jsonl.
"""

from __future__ import annotations

from typing import Any

CURRENT = 2
_EVIDENCE_MARKS = (("suite", "execution"), ("rejected", "exclusivity"), ("clusters", "vote"))
_EVIDENCE_FIELDS = {
    "vote": {"clusters", "reason"},
    "exclusivity": {"rejected", "excluded", "support", "refuted", "reason", "kept_incumbent"},
    "execution": {
        "suite",
        "empty_suite",
        "tied_candidates",
        "candidates",
        "report",
        "generated_inputs",
        "reason",
    },
}


def schema_of(manifest: dict[str, Any]) -> int:
    return int(manifest.get("schema_version", 1))


def manifest_to_current(raw: dict[str, Any]) -> dict[str, Any]:
    manifest = raw if schema_of(raw) >= CURRENT else _schema1_manifest(raw)
    run = manifest.get("run")
    if isinstance(run, dict) and "seeds" not in run:  # before seeds were per problem: its cache keys are shared
        manifest = {**manifest, "run": {**run, "seeds": "shared"}}
    return _trt_as_it_ran(manifest)


def _trt_as_it_ran(manifest: dict[str, Any]) -> dict[str, Any]:
    """A TRT run recorded before its strategy prompts were domain-specific asked the generic one, and one on code
    recorded before the execution selector had `rank` chose by behaviour agreement: each resumes and replays as
    it ran (TRT now defaults to domain strategies and unit tests with expected outputs)."""
    method, run = manifest.get("method"), manifest.get("run")
    if not (isinstance(run, dict) and isinstance(method, dict) and method.get("name") == "trt"):
        return manifest
    options = dict(run.get("method_options") or {})
    if "strategy_prompts" not in method:
        options.setdefault("strategy_prompts", "generic")
    selector = method.get("selector")
    if isinstance(selector, dict) and selector.get("name") == "execution" and "rank" not in selector:
        options["selector_options"] = {**dict(options.get("selector_options") or {}), "rank": "agreement"}
    return {**manifest, "run": {**run, "method_options": options}}


def _schema1_manifest(raw: dict[str, Any]) -> dict[str, Any]:
    run = dict(raw.get("run") or {})
    base = run.get("api_base")
    run["api_base"] = [] if base is None else [base] if isinstance(base, str) else base
    return {
        "schema_version": CURRENT,
        "kind": "batch",
        "run": run,
        "effective": None,
        "method": raw.get("method") or {},
        "benchmark": raw.get("benchmark") or {},
        "model": raw.get("model"),
        "versions": raw.get("versions") or {},
        "created": raw.get("created") or "",
        "resumed": [],
    }


def summary_to_current(raw: dict[str, Any]) -> dict[str, Any]:
    if int(raw.get("schema_version", 1)) >= CURRENT:
        return raw
    summary = {k: v for k, v in raw.items() if k != "pass@1_avg"}
    if "pass@1_avg" in raw:
        summary["pass@1"] = raw["pass@1_avg"]
    ledger = dict(raw.get("ledger") or {})
    known = ledger.pop("cost_known", True)
    ledger["known_cost_usd"] = ledger.get("cost_usd", 0.0)
    ledger["cost_usd"] = ledger.get("cost_usd", 0.0) if known else None
    if not ledger.get("train_steps"):
        ledger["train_flops"] = None
    summary["ledger"] = ledger
    if raw.get("rounds"):
        rounds = dict(raw["rounds"])
        rounds["pass@1"] = rounds.pop("rollout_mean", [])
        summary["rounds"] = rounds
    all_failed = ledger.get("calls", 0) > 0 and ledger.get("errors") == ledger.get("calls") and raw.get("first_error")
    if all_failed:  # schema 1 wrote accuracy 0.0 for a run that measured nothing
        summary["accuracy"] = summary["pass@1"] = None
    if not raw.get("ttrl"):
        summary.pop("ttrl", None)
    summary["schema_version"] = CURRENT
    return summary


def result_to_current(raw: dict[str, Any]) -> dict[str, Any]:
    """One results.jsonl line of a schema-1 run."""
    line = dict(raw)
    if "problem_id" not in line and "id" in line:
        line["problem_id"] = line.pop("id")
    if "details" in line:
        details = line.pop("details") or {}
        line.update({k: details[k] for k in ("rounds", "ttrl") if k in details})
    if line.get("selection"):
        line["selection"] = _selection(line["selection"])
    if line.get("rounds"):
        line["rounds"] = [_round(r) for r in line["rounds"]]
    return line


def checkpoint_to_current(raw: dict[str, Any]) -> dict[str, Any]:
    """One rounds.jsonl line (a TRT round checkpoint) of a schema-1 run."""
    entry = dict(raw)
    state = entry.get("state")
    if isinstance(state, dict) and "rejected" in state:
        entry["state"] = {**{k: v for k, v in state.items() if k != "rejected"}, "refutations": state["rejected"]}
    if isinstance(entry.get("record"), dict):
        entry["record"] = _round(entry["record"])
    return entry


def _round(raw: dict[str, Any]) -> dict[str, Any]:
    record = dict(raw)
    if any(isinstance(r, dict) for r in record.get("rejected") or ()):
        record["refutations"] = record["rejected"]
        record["rejected"] = [r["answer"] for r in record["rejected"]]
    if record.get("selection"):
        record["selection"] = _selection(record["selection"])
    return record


def _selection(raw: dict[str, Any]) -> dict[str, Any]:
    evidence = raw.get("evidence")
    if not isinstance(evidence, dict) or "kind" in evidence:
        return raw
    kind = next((k for mark, k in _EVIDENCE_MARKS if mark in evidence), None)
    if kind is None:
        return {**raw, "evidence": None}
    kept = {k: v for k, v in evidence.items() if k in _EVIDENCE_FIELDS[kind]}
    return {**raw, "evidence": {"kind": kind, **kept}}
