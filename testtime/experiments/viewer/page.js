// testtime view: the page's script (see page.py). Model texts are only ever set with textContent.
const $ = (tag, attrs = {}, ...kids) => {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) { if (k === "text") el.textContent = v; else el.setAttribute(k, v); }
  for (const kid of kids) el.append(kid);
  return el;
};
// Python's rounding, so the page says what the terminal says: toFixed breaks an exact tie upwards (0.3125 → 0.313),
// Python's format to the even digit (0.312). toFixed(d + 60) spells the double's exact expansion far enough to see one.
const fixed = (x, d) => {
  const [whole, frac = ""] = Math.abs(x).toFixed(Math.min(100, d + 60)).split(".");
  if (!/^50*$/.test(frac.slice(d)) || Number((whole + frac.slice(0, d)).slice(-1)) % 2) return x.toFixed(d);
  return (x < 0 ? "-" : "") + whole + (d ? "." + frac.slice(0, d) : "");
};
const fmt = (x, d = 3) => (x === null || x === undefined) ? "–" : (typeof x === "number" ? fixed(x, d) : String(x));
const ci = (m) => m ? `${fmt(m.mean)} [${fmt(m.ci_low)}, ${fmt(m.ci_high)}]` : "–";
const verdict = (ok) => ok === null || ok === undefined ? $("span", {class: "muted", text: "unlabelled"})
  : $("span", {class: ok ? "ok" : "bad", text: ok ? "✓" : "✗"});

function curve(xs, series) {
  const w = 420, h = 140, pad = 24, svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("width", w); svg.setAttribute("height", h);
  const xmax = Math.max(1, ...xs), colours = ["#3b6fb6", "#c05a1a", "#2a8a3e", "#7a3fa0"];
  Object.entries(series).forEach(([name, ys], i) => {
    const points = xs.map((x, j) => ys[j] === null || ys[j] === undefined ? null :
      `${pad + (w - 2 * pad) * x / xmax},${h - pad - (h - 2 * pad) * Math.max(0, Math.min(1, ys[j]))}`).filter(Boolean);
    const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
    line.setAttribute("points", points.join(" ")); line.setAttribute("fill", "none");
    line.setAttribute("stroke", colours[i % colours.length]);
    svg.append(line);
    const label = document.createElementNS("http://www.w3.org/2000/svg", "text");
    label.setAttribute("x", pad + 110 * i); label.setAttribute("y", 12); label.setAttribute("font-size", "10");
    label.setAttribute("fill", colours[i % colours.length]); label.textContent = name;
    svg.append(label);
  });
  return svg;
}

function runTable(run, r) {
  const box = $("div");
  box.append($("h2", {text: `${run.method} on ${run.bench} · ${run.model}`}), $("div", {class: "muted", text: run.path}));
  if (run.uses_labels) box.append($("div", {class: "labels", text: "uses labels: trained on the true labels (oracle reward), an upper bound, not a label-free result"}));
  const facts = $("table");
  const cost = run.ledger.cost_usd === null || run.ledger.cost_usd === undefined ? "unknown" : `$${fmt(run.ledger.cost_usd, 4)}`;
  const rows = [["accuracy (95% CI)", ci(run.accuracy)], ["pass@1 (mean over the final samples)", ci(run["pass@1"])],
    ["calls / tokens / cost", `${run.ledger.calls ?? "–"} / ${run.ledger.tokens ?? "–"} / ${cost}`]];
  if (run.rounds) rows.push(["accuracy by round", run.rounds.accuracy.map(x => fmt(x, 2)).join(" ")],
                            ["oracle coverage by round", run.rounds.coverage.map(x => fmt(x, 2)).join(" ")]);
  if (run.ttrl && run.ttrl["pass@1_before"]) rows.push(["ttrl: pass@1 before → after", `${ci(run.ttrl["pass@1_before"])} → ${ci(run.ttrl["pass@1_after"])}`],
                                                     ["ttrl: paired gain", ci(run.ttrl["pass@1_gain"])]);
  const stream = run.prequential;
  if (stream) {
    const served = stream.order === "served";  // a server that learns: its requests, answered in this order
    const ungraded = served ? "not graded: labels known later go in with testtime grade --run" : ci(stream.accuracy);
    rows.push([served ? "requests (learning server)" : "stream",
               `${stream.arrivals} ${served ? "requests in the order answered" : `arrivals (${stream.order} order)`}, ${stream.updates} updates, final state ${stream.final_state}`],
              ["prequential accuracy", stream.accuracy ? ci(stream.accuracy) : ungraded],
              [`by window of ${stream.window} (state)`, stream.windows.map(w => `${w.accuracy ? fmt(w.accuracy.mean, 2) : "–"} (${w.state})`).join(" ")]);
  }
  for (const [k, v] of rows) facts.append($("tr", {}, $("th", {text: k}), $("td", {text: v})));
  box.append(facts);
  if (run.curves.step.length) box.append($("h3", {text: "TTRL steps"}), curve(run.curves.step,
    {"majority ratio": run.curves.majority_ratio, "entropy": run.curves.entropy, "reward": run.curves.reward}),
    curve(run.curves.audit_step, {"label accuracy (audit)": run.curves.label_correct, "policy accuracy (audit)": run.curves.ground_truth_ratio}));
  const filter = $("input", {placeholder: "filter problems", id: `filter-${r}`});
  const mixed = new Set(run.problems.map(p => p.method)).size > 1;  // a served run whose requests named methods
  const heads = ["problem", "question", "", ...(mixed ? ["method"] : []), "status", "prediction", "confidence", "calls", "tokens", "cost"];
  const table = $("table", {}, $("tr", {}, ...heads.map(t => $("th", {text: t}))));
  for (const p of run.problems) {
    const row = $("tr", {class: "problem", "data-run": r, "data-problem": p.id, "data-question": p.question}, $("td", {class: "id", text: p.id, title: p.id}),
      $("td", {class: "question", text: p.question}), $("td", {}, verdict(p.correct)),
      ...(mixed ? [$("td", {text: p.method})] : []), $("td", {text: p.status}), $("td", {text: p.prediction}),
      $("td", {class: "confidence", text: fmt(p.confidence, 2)}), $("td", {text: p.calls}), $("td", {text: p.tokens}), $("td", {text: `$${fmt(p.cost_usd, 4)}`}));
    row.onclick = () => { location.hash = `run=${r}&problem=${encodeURIComponent(p.id)}`; };
    table.append(row);
  }
  filter.oninput = () => { for (const row of table.querySelectorAll("tr.problem")) row.style.display = (row.dataset.problem + " " + row.dataset.question).toLowerCase().includes(filter.value.toLowerCase()) ? "" : "none"; };
  box.append(filter, table);
  return box;
}

// MathML built node by node from the whitelisted tree data.py sends (never parsed from a string)
const MATHML = "http://www.w3.org/1998/Math/MathML";
function mathNode(tree) {
  if (typeof tree === "string") return document.createTextNode(tree);
  const [tag, attrs, ...kids] = tree;
  const el = document.createElementNS(MATHML, /^m[a-z]*$/.test(tag) ? tag : "mrow");
  for (const [k, v] of Object.entries(attrs)) if (!/^(on|href|xlink)/i.test(k)) el.setAttribute(k, v);
  for (const kid of kids) el.append(mathNode(kid));
  return el;
}

function statementView(st) {
  const box = $("div", {class: "statement"});
  if (st.from_prompt) box.append($("div", {class: "muted", text: "statement (the prompt's last user message; this run predates problems.jsonl)"}));
  const body = $("div", {class: "statement-text"});
  for (const piece of st.segments) body.append(piece.math ? mathNode(piece.math) : document.createTextNode(piece.text));
  box.append(body);
  if (st.starter_code) box.append($("div", {class: "muted", text: "starter code"}), $("pre", {text: st.starter_code}));
  return box;
}

function gradeView(d) {
  if (d.correct === null || d.correct === undefined) return $("div", {class: "muted", text: "unlabelled: nothing to grade against"});
  const rows = [["reference", d.reference ?? "(not recorded: graded by an older version; --replay re-grades)"],
    ["graded answer", d.domain === "code" ? (d.graded_answer ? "(the program below)" : "(none)") : (d.graded_answer ?? "(none)")], ["status", d.status]];
  const table = $("table", {class: "grade"}, ...rows.map(([k, v]) => $("tr", {}, $("th", {text: k}), $("td", {text: v}))));
  if (d.reference_math) { const cell = table.rows[0].cells[1]; cell.title = d.reference; cell.replaceChildren(mathNode(d.reference_math)); }
  return table;
}

function classesView(classes) {
  const t = $("table", {}, $("tr", {}, ...["answer class", "", "size", "candidates"].map(x => $("th", {text: x}))));
  for (const c of classes) t.append($("tr", {class: c.chosen ? "chosen" : ""}, $("td", {text: c.answer === null ? "(no answer)" : c.answer.slice(0, 120)}),
    $("td", {}, c.answer === null ? $("span") : verdict(c.correct)), $("td", {text: c.size}), $("td", {text: c.indices.join(" ")})));
  return t;
}

function messagesView(title, messages) {
  const d = $("details", {}, $("summary", {text: title}));
  for (const m of messages) d.append($("div", {class: "muted", text: m.role}), $("pre", {text: m.text}));
  return d;
}

function callView(call) {
  if (!call) return $("span", {class: "muted", text: "(not in the trace)"});
  const shared = call.shared ? `, after the shared prompt's ${call.shared} message(s)` : "";
  if (!call.messages.length) return $("span", {class: "muted", text: `prompt: the shared prompt (${call.outcome})`});
  return messagesView(`prompt (${call.purpose}, round ${call.step ?? "–"}, ${call.outcome}${shared})`, call.messages);
}

// a sample's token statistics (runs with --logprobs): what was measured, over which distribution
function statsText(s) {
  if (!s) return "";
  const parts = [["mean log p", s.logprob_mean], ["entropy", s.entropy_mean], ["self-certainty", s.self_certainty]]
    .filter(([, v]) => v !== null).map(([name, v]) => `${name} ${fixed(v, 3)}`);
  return ` · ${s.tokens} tokens · ${parts.join(" · ")} (${s.top_k === null ? "full distribution" : `top ${s.top_k}`})`;
}

function candidatesView(cands) {
  const t = $("table", {}, $("tr", {}, ...["#", "", "answer", "class", "score", "why"].map(x => $("th", {text: x}))));
  for (const c of cands) {
    const row = $("tr", {class: c.chosen ? "chosen" : ""}, $("td", {text: c.index}), $("td", {}, verdict(c.correct)),
      $("td", {text: c.answer === null ? "(none)" : c.answer.slice(0, 120)}), $("td", {text: fmt(c.class, 0)}), $("td", {text: fmt(c.score, 2)}),
      $("td", {class: "why", text: c.why ?? (c.error ? `error: ${c.error}` : (c.status ?? ""))}));
    const more = $("tr", {}, $("td", {colspan: 6}, $("details", {}, $("summary", {text: "text" + statsText(c.token_stats)}), $("pre", {text: c.text})), callView(c.call)));
    t.append(row, more);
  }
  return t;
}

function timelineView(rounds) {
  const box = $("div", {class: "timeline"});
  for (const r of rounds) {
    const mark = r.correct === null || r.correct === undefined ? "" : (r.correct ? " ✓" : " ✗");
    const step = $("div", {class: "step"}, $("div", {class: "muted", text: `round ${r.round}`}),
      $("div", {class: r.correct === null ? "picked" : (r.correct ? "picked ok" : "picked bad"), text: `${r.selected ?? "(none)"}${mark}`}));
    const chips = $("div");
    for (const c of r.candidates) chips.append($("span", {class: c.answer !== null && c.answer === r.selected ? "chip same" : "chip", title: c.strategy ?? "", text: c.answer ?? "–"}));
    step.append(chips, $("div", {class: "muted", text: `${r.knowledge_after.length} lesson(s)${r.covered ? " · covered" : ""}`}));
    box.append(step);
  }
  return box;
}

function roundsView(rounds) {
  const box = $("div", {class: "rounds"});
  for (const r of rounds) {
    const d = $("details", {class: "round", open: ""}, $("summary", {text: `round ${r.round}: selected ${r.selected ?? "(none)"} ${r.correct === null ? "" : (r.correct ? "✓" : "✗")}${r.covered ? " · covered" : ""}`}));
    const cands = $("table", {}, $("tr", {}, ...["#", "answer", "strategy", "error"].map(x => $("th", {text: x}))));
    for (const c of r.candidates) cands.append($("tr", {}, $("td", {text: c.index}), $("td", {text: c.answer ?? "(none)"}), $("td", {text: c.strategy ?? ""}), $("td", {text: c.error ?? ""})));
    d.append(cands);
    const list = (title, items, show) => { if (items.length) { d.append($("h3", {text: title})); const ul = $("ul"); for (const i of items) ul.append($("li", {text: show(i)})); d.append(ul); } };
    list("knowledge before", r.knowledge_before, k => `[${k.id}] ${k.text}`);
    list("knowledge after", r.knowledge_after, k => `[${k.id}] ${k.text}`);
    list("refutations", r.refutations, x => `${x.answer} (round ${x.round}): ${x.reason}`);
    list("rejected", r.rejected, x => x);
    list("strategies for the next round", r.next_strategies, s => `${s.key_technique}: ${s.what_to_try}`);
    if (r.reflection) d.append($("h3", {text: "reflection"}), $("pre", {text: r.reflection}));
    if (r.selection) d.append($("details", {}, $("summary", {text: `selection evidence (${r.selection.rule})`}), $("pre", {text: JSON.stringify(r.selection.evidence, null, 1)})));
    box.append(d);
  }
  return box;
}

function matrixView(m) {
  const t = $("table", {class: "matrix"});
  const width = m.rows.length ? m.rows[0].verdicts.length : 0, heads = ["candidate"];
  for (let i = 0; i < width; i++) heads.push(i < m.public ? `public ${i + 1}` : `input ${i - m.public + 1}`);
  t.append($("tr", {}, ...heads.map(h => $("th", {text: h}))));
  for (const row of m.rows) t.append($("tr", {}, $("td", {text: row.index}), ...row.verdicts.map(v => $("td", {class: v === "pass" ? "ok" : "bad", text: v}))));
  return t;
}

function votesView(t) {
  const box = $("div");
  if (t.test_inputs.length) box.append($("div", {class: "muted", text: `test inputs written before training: ${t.test_inputs.length}`}));
  const table = $("table", {}, $("tr", {}, ...["step", "label", "label ok (audit)", "majority ratio", "rewards", "skipped"].map(x => $("th", {text: x}))));
  for (const v of t.votes) table.append($("tr", {}, $("td", {text: v.step}), $("td", {text: (v.label ?? "(none)").slice(0, 60)}), $("td", {}, v.label_correct === null ? $("span") : verdict(v.label_correct)),
    $("td", {text: fmt(v.majority_ratio, 2)}), $("td", {text: v.rewards.join(" ")}), $("td", {text: v.skipped ?? ""})));
  box.append(table);
  return box;
}

// the problem's calls that made no candidate (a critique, a judge, a reflection), each folded: prompt, reply
function callsView(calls) {
  const box = $("div", {class: "calls"});
  for (const c of calls) {
    const d = $("details", {class: "call"}, $("summary", {text: `${c.purpose}${c.step === null ? "" : ", round " + c.step} (${c.outcome})`}));
    d.append(messagesView("prompt", c.messages), $("div", {class: "muted", text: "reply"}), $("pre", {text: c.response}));
    box.append(d);
  }
  return box;
}

async function detailOf(r, pid) {
  if (DATA.details) return DATA.details[r][pid];
  const reply = await fetch(`api/detail?run=${r}&problem=${encodeURIComponent(pid)}`);
  return await reply.json();
}

async function show() {
  const params = new URLSearchParams(location.hash.slice(1));
  const pane = document.getElementById("detail");
  if (!params.has("problem")) { pane.replaceChildren($("p", {class: "muted", text: "pick a problem"})); return; }
  const r = Number(params.get("run") || 0), pid = params.get("problem");
  const d = await detailOf(r, pid);
  pane.replaceChildren($("h2", {text: `${pid} `}, verdict(d.correct)));
  if (d.statement) pane.append($("h3", {text: "problem"}), statementView(d.statement));
  pane.append($("h3", {text: "graded against"}), gradeView(d), $("div", {text: `prediction ${String(d.prediction ?? "(none)").slice(0, 200)}`}));
  if (d.selection) pane.append($("div", {class: "muted", text: `selection: ${d.selection.rule}${d.selection.tie ? " (tie)" : ""}`}));
  const w = d.answered_with;
  if (w) pane.append($("div", {class: "muted", text: `arrival ${w.arrival}, answered with ${{none: "no adaptation", memory: "memory version", weights: "weights after optimiser step"}[w.kind]}${w.kind === "none" ? "" : " " + w.state}${w.memory.length ? "; lessons shown: " + w.memory.map(i => "M" + i).join(" ") : ""}`}));
  if (d.rounds.length) pane.append($("h3", {text: "timeline"}), timelineView(d.rounds), $("h3", {text: "rounds"}), roundsView(d.rounds));
  if (d.matrix && d.matrix.rows.length) pane.append($("h3", {text: "execution verdicts"}), matrixView(d.matrix));
  if (d.ttrl) pane.append($("h3", {text: "TTRL votes"}), votesView(d.ttrl));
  if (d.classes.length) pane.append($("h3", {text: `answer classes (${d.classes.length})`}), classesView(d.classes));
  if (d.shared_prompt.length) pane.append($("h3", {text: "prompt"}), messagesView(`the prompt every candidate shared (${d.shared_prompt.length} message(s))`, d.shared_prompt));
  pane.append($("h3", {text: `candidates (${d.candidates.length})`}), candidatesView(d.candidates));
  if (d.calls && d.calls.length) pane.append($("h3", {text: `other calls (${d.calls.length})`}), callsView(d.calls));
  document.body.dataset.shown = pid;
}

window.onerror = (message) => { const e = document.getElementById("errors"); e.textContent += String(message) + "\n"; };
window.addEventListener("unhandledrejection", (event) => window.onerror(String(event.reason)));
window.addEventListener("hashchange", show);
const runs = document.getElementById("runs");
DATA.runs.forEach((run, r) => runs.append(runTable(run, r)));
show().then(() => { document.body.dataset.ready = "1"; });
