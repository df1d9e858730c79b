"""`testtime view` in a real headless browser (Debian's chromium): the page renders with no script error and
shows a problem's rounds, served from 127.0.0.1 or as one static file; a model's text cannot script it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from testtime.experiments.viewer import Viewer, load

Cli = Callable[..., CompletedProcess[str]]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no chromium here (apt-get install chromium)")


def dom(url: str) -> str:
    """The page as the browser left it after its scripts ran."""
    done = subprocess.run(
        [
            CHROMIUM or "",
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=5000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def errors_in(page: str) -> str:
    start = page.index('<pre id="errors"')
    return page[page.index(">", start) + 1 : page.index("</pre>", start)]


@pytest.fixture(scope="module")
def trt_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("view") / "trt"
    done = subprocess.run(
        [sys.executable, "-m", "testtime.cli", "run", "--method", "trt", "--bench", "arith", "--limit", "3",
         "-T", "2", "-K", "2", "--model", "fake:echo", "--quiet", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


@needs_chromium
def test_the_static_page_shows_a_problems_rounds_without_errors(trt_run: Path, testtime_cli: Cli) -> None:
    page_file = trt_run.parent / "trt.html"
    assert testtime_cli("view", str(trt_run), "--html", str(page_file)).returncode == 0
    page = dom(f"{page_file.as_uri()}#run=0&problem=arith-d2-1")
    assert 'data-ready="1"' in page and 'data-shown="arith-d2-1"' in page
    assert errors_in(page).strip() == ""
    assert "round 1: selected" in page and "round 2: selected" in page and "strategies for the next round" in page
    assert 'class="timeline"' in page and "What is" in page and "not equivalent to the reference" in page


@needs_chromium
def test_the_served_page_fetches_a_problem_on_demand(trt_run: Path) -> None:
    with Viewer(load([trt_run])) as viewer:
        page = dom(f"{viewer.url}#run=0&problem=arith-d2-2")
    assert 'data-shown="arith-d2-2"' in page and errors_in(page).strip() == ""
    assert "round 2: selected" in page and "reflection" in page


@needs_chromium
def test_a_models_text_cannot_script_the_page(tmp_path: Path, testtime_cli: Cli) -> None:
    hostile = "<img src=x onerror=\"document.body.dataset.pwned='1'\"><script>document.body.dataset.pwned='1'</script>"
    out = tmp_path / "run"
    done = testtime_cli("run", "--method", "majority", "--bench", "arith", "--limit", "1", "--n", "2", "--quiet",
                        "--model", f"fake:const:{hostile} \\boxed{{1}}", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    page_file = tmp_path / "view.html"
    assert testtime_cli("view", str(out), "--html", str(page_file)).returncode == 0
    page = dom(f"{page_file.as_uri()}#run=0&problem=arith-d2-0")
    assert 'data-shown="arith-d2-0"' in page and "data-pwned" not in page
    assert "&lt;script&gt;" in page  # shown as text


@needs_chromium
def test_a_code_run_shows_the_execution_verdict_matrix(
    tmp_path: Path, shared_data: Path, open_sandbox_or_skip, testtime_cli: Cli
) -> None:  # type: ignore[no-untyped-def]
    program = "```python\nn = input()\nprint(n)\n```"
    out = tmp_path / "code"
    args = ["run", "--method", "majority", "--bench", "lcb-v6", "--data-dir", str(shared_data), "--limit", "1"]
    done = testtime_cli(
        *args, "--n", "2", "--quiet", "--model", f"fake:const:{program}", "--out", str(out), timeout=300
    )
    assert done.returncode == 0, done.stderr
    [record] = [line for line in (out / "results.jsonl").read_text().splitlines()]
    pid = record.split('"problem_id": "')[1].split('"')[0]
    page_file = tmp_path / "code.html"
    assert testtime_cli("view", str(out), "--html", str(page_file)).returncode == 0
    page = dom(f"{page_file.as_uri()}#run=0&problem={pid}")
    assert "execution verdicts" in page and "public 1" in page and errors_in(page).strip() == ""
    assert "hidden tests</td>" in page and ("fails a hidden test" in page or "passes all" in page)


@needs_chromium
def test_a_problem_opens_with_its_statement_reference_and_why(tmp_path: Path, testtime_cli: Cli) -> None:
    """A user's file whose statement has math and markup: the math is rendered as MathML, the markup shown as
    text; the reference and each candidate's verdict explained; the answer classes and the shared prompt once."""
    hostile = "<img src=x onerror=\"document.body.dataset.pwned='1'\">"
    data = tmp_path / "mine.jsonl"
    data.write_text(json.dumps({"id": "q1", "problem": f"Find $\\frac{{1}}{{2}} + x$ {hostile}", "answer": "1/2"}))
    out = tmp_path / "run"
    done = testtime_cli("run", "--method", "majority", "--bench", str(data), "--n", "3", "--quiet",
                        "--model", "fake:const:so \\boxed{0.5}", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    page_file = tmp_path / "view.html"
    assert testtime_cli("view", str(out), "--html", str(page_file)).returncode == 0
    page = dom(f"{page_file.as_uri()}#run=0&problem=q1")
    assert 'data-shown="q1"' in page and errors_in(page).strip() == "" and "data-pwned" not in page
    statement = page[page.index('class="statement-text"') :]
    assert "<mfrac>" in statement[: statement.index("</div>")] and "&lt;img src=x" in statement
    assert "graded against" in page and "0.5 is equivalent to the reference 1/2" in page
    assert "answer classes (1)" in page and "the prompt every candidate shared (" in page
    assert "prompt: the shared prompt" in page  # each candidate's own prompt is not repeated


def test_export_writes_an_inspect_log_that_inspect_reads_back(trt_run: Path, tmp_path: Path, testtime_cli: Cli) -> None:
    """Every call of a TRT run is a model event inside its round's span, the rounds and the selection are info
    events, the grade a score event against the reference; inspect's own reader and dataframes see them."""
    log_module = pytest.importorskip("inspect_ai.log")
    analysis = pytest.importorskip("inspect_ai.analysis")
    out = tmp_path / "trt.eval"
    done = testtime_cli("export", str(trt_run), "--format", "inspect", "--out", str(out))
    assert done.returncode == 0, done.stderr
    log = log_module.read_eval_log(str(out))
    assert log.status == "success" and log.eval.task == "testtime/trt/arith" and len(log.samples) == 3
    assert log.eval.solver == "trt" and log.eval.task_args["digits"] == 2
    assert log.eval.model_generate_config.temperature == pytest.approx(0.6)  # TRT's solver sampling
    sample = next(s for s in log.samples if s.id == "arith-d2-1")
    assert sample.target == "147" and "What is" in str(sample.input)  # the reference, once graded
    assert sample.scores["testtime"].value in ("C", "I") and "reference 147" in sample.scores["testtime"].explanation
    traced = [line for line in (trt_run / "trace.jsonl").read_text().splitlines() if '"arith-d2-1"' in line]
    models = [e for e in sample.events if e.event == "model"]
    assert len(models) == len(traced) == 7  # strategies, then 2 rounds of 2 rollouts and a reflection
    assert {e.span_id for e in models if e.metadata["purpose"] == "solve"} == {"round 1", "round 2"}
    assert all(e.output.usage.output_tokens > 0 and e.input for e in models)
    infos = [e.source for e in sample.events if e.event == "info"]
    assert infos == ["round 1", "round 2", "selection"] and sample.events[-1].event == "score"
    assert sample.model_usage["fake:echo"].total_tokens == sum(e.output.usage.total_tokens for e in models)
    assert sample.total_time is not None and sample.working_time is not None
    assert [r["round"] for r in sample.metadata["rounds"]] == [1, 2]
    assert log.results.scores[0].metrics["accuracy"].value == pytest.approx(0.0)
    samples = analysis.samples_df(str(out))
    assert sorted(samples["target"]) == ["121", "147", "157"] and samples["total_time"].notna().all()
    events = analysis.events_df(str(out))
    assert (events["event"] == "model").sum() == 21


def test_an_unlabelled_runs_inspect_log_has_no_target_no_grade_and_its_label_free_score(
    tmp_path: Path, testtime_cli: Cli
) -> None:
    """Nothing graded (no target, no `testtime` score), but the label-free confidence is a score of its own;
    `--out DIR/` writes <run>.eval inside the folder."""
    pytest.importorskip("inspect_ai.log")
    from inspect_ai.log import read_eval_log

    data = tmp_path / "mine.jsonl"
    data.write_text('{"id": "a", "problem": "What is 2+2?"}\n')
    out = tmp_path / "run"
    done = testtime_cli("run", "--method", "majority", "--bench", str(data), "--n", "3", "--quiet",
                        "--model", "fake:const:\\boxed{4}", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = testtime_cli("export", str(out), "--format", "inspect", "--out", f"{tmp_path / 'exports'}/")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "exports").iterdir()) == ["run.eval"]
    assert not (tmp_path / "exports.eval").exists()
    log = read_eval_log(str(tmp_path / "exports" / "run.eval"))
    [sample] = log.samples
    assert sample.target == "" and "testtime" not in sample.scores and sample.metadata["votes"] == {"4": 3}
    assert sample.scores["label_free"].value == 1.0 and sample.scores["label_free"].metadata["vote_share"] == 1.0
    assert [e.scorer for e in sample.events if e.event == "score"] == ["label_free"]
    assert log.results.scores[0].metrics == {} and log.results.scores[1].metrics["mean"].value == 1.0
    assert str(sample.input).count("What is 2+2?") >= 1
    assert log.eval.task == "testtime/majority/mine"  # the file's name, never its absolute path


@needs_chromium
def test_a_candidates_token_statistics_are_shown_with_their_distribution(tmp_path: Path, testtime_cli: Cli) -> None:
    from testtime.models.mock_server import MockChatServer

    out = tmp_path / "run"
    with MockChatServer() as server:
        done = testtime_cli("run", "--method", "majority", "--limit", "1", "--n", "2", "--quiet", "--logprobs", "3",
                            "--model", "openai:mock", "--api-base", server.url, "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    page_file = tmp_path / "view.html"
    assert testtime_cli("view", str(out), "--html", str(page_file)).returncode == 0
    first = json.loads((out / "results.jsonl").read_text().splitlines()[0])["problem_id"]
    page = dom(f"{page_file.as_uri()}#run=0&problem={first}")
    assert errors_in(page).strip() == ""
    # the mock's tokens: chosen at p=0.6 among 0.6/0.3/0.1, so mean log p = log 0.6
    assert page.count("tokens · mean log p -0.511 · entropy 0.898 · self-certainty 0.241 (top 3)") == 2


@needs_chromium
def test_a_stream_run_shows_its_prequential_record_and_each_answers_state(tmp_path: Path, testtime_cli: Cli) -> None:
    from testtime.models.mock_server import MockChatServer, carry_lesson_reply

    out = tmp_path / "run"
    with MockChatServer(reply=carry_lesson_reply) as server:
        done = testtime_cli("run", "--method", "trt", "-T", "1", "-K", "2", "--method-opt", "memory=shared", "--stream",
                            "--limit", "3", "--quiet", "--model", "openai:mock", "--api-base", server.url,
                            "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    page_file = tmp_path / "view.html"
    assert testtime_cli("view", str(out), "--html", str(page_file)).returncode == 0
    page = dom(f"{page_file.as_uri()}#run=0&problem=arith-d2-2")
    assert errors_in(page).strip() == ""
    assert "3 arrivals (dataset order), 1 updates, final state 1" in page
    assert "arrival 2, answered with memory version 1; lessons shown: M1" in page


@needs_chromium
def test_an_html_comment_opener_cannot_blank_the_static_page(tmp_path: Path, testtime_cli: Cli) -> None:
    """`<!--<script>` inside the page's inline JSON switches the HTML parser into a state where the real
    `</script>` no longer closes the block: the whole page went blank. In a statement and in an answer."""
    opener = "<!--<script>"
    data = tmp_path / "mine.jsonl"
    data.write_text(json.dumps({"id": "q1", "problem": f"What is 1? {opener} \u2028", "answer": "1"}))
    out = tmp_path / "run"
    done = testtime_cli("run", "--method", "majority", "--bench", str(data), "--n", "2", "--quiet",
                        "--model", f"fake:const:{opener} \\boxed{{1}}", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    page_file = tmp_path / "view.html"
    assert testtime_cli("view", str(out), "--html", str(page_file)).returncode == 0
    page = dom(f"{page_file.as_uri()}#run=0&problem=q1")
    assert 'data-shown="q1"' in page and errors_in(page).strip() == ""
    assert "&lt;!--&lt;script&gt;" in page  # shown as text, in the statement and the answer


@needs_chromium
def test_the_list_of_problems_shows_each_question_and_its_confidence(tmp_path: Path, testtime_cli: Cli) -> None:
    """A served run's rows are request ids: the question beside each says what was asked; the label-free
    confidence is a column, and the filter finds a problem by its question."""

    served = tmp_path / "served"
    shutil.copytree(Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "served-majority-v2", served)
    (served / "problems.jsonl").unlink()  # as a served run leaves it: the question comes from the prompt
    page_file = tmp_path / "served.html"
    assert testtime_cli("view", str(served), "--html", str(page_file)).returncode == 0
    page = dom(page_file.as_uri())
    assert errors_in(page).strip() == ""
    rows = re.findall(r'<tr class="problem".*?</tr>', page, re.S)
    assert len(rows) == 2 and all('class="confidence">1.00<' in row for row in rows)
    assert sorted(re.search(r'class="question">([^<]*)<', row)[1][:6] for row in rows) == ["Say 1.", "Say 2."]


@needs_chromium
def test_the_page_rounds_as_the_terminal_and_counts_an_unfinished_runs_calls(tmp_path: Path, testtime_cli: Cli) -> None:
    """5 of 16 is 0.3125: the terminal says 0.312 (Python rounds the tie to even), the page once said 0.313. A run
    with no summary yet (a served run between stops) once showed `– / – / unknown` for its calls and tokens."""
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps({"id": f"p{i}", "problem": f"What is {i}?", "answer": "1" if i < 5 else "2"})
                            + "\n" for i in range(16)))  # fmt: skip
    out = tmp_path / "run"
    done = testtime_cli("run", "--method", "majority", "--bench", str(data), "--n", "2", "--quiet",
                        "--model", "fake:const:\\boxed{1}", "--out", str(out))  # fmt: skip
    assert done.returncode == 0 and "0.312" in done.stdout, done.stdout
    page_file = tmp_path / "view.html"
    assert testtime_cli("view", str(out), "--html", str(page_file)).returncode == 0
    page = dom(page_file.as_uri())
    assert "0.312 [" in page and "0.313 [" not in page and errors_in(page).strip() == ""
    (out / "summary.json").unlink()
    assert testtime_cli("view", str(out), "--html", str(page_file)).returncode == 0
    page = dom(page_file.as_uri())
    assert "32 / " in page and "– / – / unknown" not in page  # 16 problems × 2 samples, from the ledger
