"""The Python package as a user calls it, checked against the CLI and against counts read
from the trace files with plain Python."""

import gzip
import json
import sys
import threading
import time

import pytest

import tracehound
from conftest import OWN, cli_json, shared

TF32 = OWN / "kineto" / "h200_fp32_no_tf32.pt.trace.json.gz"
# The largest trace the project ships: the GIL test needs a load long enough to tell a released
# GIL from a held one on a fast machine.
COMPILE = OWN / "kineto" / "h200_compile_recompile.pt.trace.json.gz"
STRAGGLER = OWN / "kineto-jobs" / "h200_ddp_straggler"


def kineto_events(path):
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def test_analyze_is_the_cli_json_report(cli):
    assert tracehound.analyze(TF32) == cli_json(cli, "analyze", TF32)
    assert tracehound.analyze(str(TF32), top=1) == cli_json(cli, "analyze", TF32, "--top", "1")


def test_analyze_of_a_job_directory_is_the_job_report(cli):
    doc = tracehound.analyze(STRAGGLER)
    assert doc == cli_json(cli, "analyze", STRAGGLER)
    truth = json.loads((OWN / "reference" / "h200_ddp_straggler.truth.json").read_text())
    first = doc["job"]["findings"][0]
    assert first["rule"] == "straggler_rank"
    assert first["metrics"]["straggler_rank"] == truth["expected"]["straggler_rank"]


def test_load_gives_the_reports_findings_and_summary(cli):
    t = tracehound.load(TF32)
    report = cli_json(cli, "analyze", TF32)["traces"][0]
    assert list(t.findings()) == report["findings"]
    assert t.summary() == report["summary"]
    assert t.source == str(TF32)
    # The planted cause (fp32 GEMMs with TF32 off) is the first finding.
    assert t.findings()[0]["rule"] == "tensor_cores"
    code, table, _ = cli("analyze", TF32)
    assert t.report("table") == table


def test_tables_hold_the_traces_events():
    events = kineto_events(TF32)
    t = tracehound.load(TF32)
    tables = t.tables()
    assert set(tables) == set(tracehound.TABLES)
    import pyarrow as pa

    kernels = tables["kernels"]
    assert isinstance(kernels, pa.Table)
    assert kernels.num_rows == sum(1 for e in events if e.get("cat") == "kernel")
    assert tables["memcpys"].num_rows == sum(1 for e in events if e.get("cat") == "gpu_memcpy")
    assert tables["memsets"].num_rows == sum(1 for e in events if e.get("cat") == "gpu_memset")
    # Kernel time in the table equals the trace's own durations (µs, rounded to ns).
    total_us = sum(e["dur"] for e in events if e.get("cat") == "kernel")
    assert abs(pa.compute.sum(kernels["dur"]).as_py() / 1e3 - total_us) < 1e-3 * len(events)
    assert kernels.schema.field("start_ns").type == pa.int64()
    assert kernels.schema.field("name").type == pa.string()
    assert tables["findings"].num_rows == len(t.findings())
    # Only what is asked for; an unknown name is an error naming the tables.
    assert list(t.tables(["steps"])) == ["steps"]
    with pytest.raises(tracehound.TracehoundError, match="no table `nope`: the tables are kernels"):
        t.tables(["nope"])


def test_polars_and_pandas_read_the_tables():
    import pandas as pd
    import polars as pl

    t = tracehound.load(TF32)
    kernels = t.tables(["kernels"])["kernels"]
    df = pl.from_arrow(kernels)
    assert df.shape == (kernels.num_rows, kernels.num_columns)
    top = df.group_by("name").agg(pl.col("dur").sum()).sort("dur", descending=True)
    assert top["dur"][0] > 0
    pdf = kernels.to_pandas()
    assert isinstance(pdf, pd.DataFrame) and len(pdf) == kernels.num_rows


def test_rule_selection_is_the_clis(cli):
    assert tracehound.analyze(TF32, rules=["tensor_cores"]) == cli_json(
        cli, "analyze", TF32, "--rules", "tensor_cores"
    )
    skipped = tracehound.analyze(TF32, skip_rules=("tensor_cores", "roofline"))
    assert skipped == cli_json(cli, "analyze", TF32, "--skip-rules", "tensor_cores,roofline")
    assert all(
        f["rule"] not in ("tensor_cores", "roofline") for f in skipped["traces"][0]["findings"]
    )
    # The default threshold is the CLI's, not a second copy of it.
    assert tracehound.analyze(TF32) == cli_json(cli, "analyze", TF32, "--gap-threshold-us", "100")
    code, _, err = cli("analyze", TF32, "--rules", "tensor_core")
    assert code == 2
    with pytest.raises(tracehound.TracehoundError) as e:
        tracehound.analyze(TF32, rules=["tensor_core"])
    assert "rules: there is no rule `tensor_core`" in str(e.value)


def test_errors_carry_the_clis_message(cli, tmp_path):
    notes = tmp_path / "job" / "notes.txt"
    notes.parent.mkdir()
    notes.write_text("not a trace")
    for path in [tmp_path / "missing.json", notes, notes.parent]:
        code, _, err = cli("analyze", path)
        assert code == 2
        message = err.strip().splitlines()[-1].removeprefix("tracehound: error: ")
        with pytest.raises(tracehound.TracehoundError) as e:
            tracehound.analyze(path)
        assert str(e.value) == message, (str(e.value), err)


def test_warnings_carry_the_clis_message(cli, tmp_path):
    cut = tmp_path / "cut.pt.trace.json"
    with gzip.open(TF32, "rb") as f:
        cut.write_bytes(f.read()[:200_000])
    code, _, err = cli("analyze", cut)
    assert code == 0
    warning = err.strip().splitlines()[0].removeprefix("tracehound: warning: ")
    with pytest.warns(UserWarning) as w:
        t = tracehound.load(cut)
    assert warning in [str(x.message) for x in w]
    assert t.warnings and warning.endswith(t.warnings[0].split(": ", 1)[1])
    with pytest.raises(tracehound.TracehoundError, match="window_ms applies to one trace"):
        tracehound.analyze(STRAGGLER, window_ms=(0, 100))
    with pytest.raises(tracehound.TracehoundError, match="not a size"):
        tracehound.load(TF32, max_memory="lots")
    with pytest.raises(tracehound.TracehoundError, match="exceeds|needs|more memory"):
        tracehound.load(TF32, max_memory="1M")


def test_notebook_html():
    t = tracehound.load(TF32)
    html = t._repr_html_()
    assert html.startswith('<div class="tracehound"><style>')
    assert "<body" not in html and "<html" not in html
    assert "Verdict" in html
    findings = t.findings()
    fhtml = findings._repr_html_()
    for f in findings:
        assert f["rule"] in fhtml
    # A filtered list renders too (the findings are read back from their JSON form).
    high = tracehound.Findings([f for f in findings if f["severity"] == "high"])
    assert high._repr_html_().count("<h2 id=") == len(high)


def test_the_gil_is_released_while_loading():
    # While another thread loads a 2.7 MB gzip trace, this thread keeps running Python: the longest
    # pause between its steps stays far below the load time. A held GIL would pause it for the
    # whole load.
    done = threading.Event()
    took = []

    def work():
        t0 = time.perf_counter()
        tracehound.load(COMPILE)
        took.append(time.perf_counter() - t0)
        done.set()

    th = threading.Thread(target=work)
    last = time.perf_counter()
    longest = 0.0
    th.start()
    while not done.is_set():
        now = time.perf_counter()
        longest = max(longest, now - last)
        last = now
    th.join()
    # Python hands the GIL over every switch interval (5 ms by default); a load of several intervals
    # tells a released GIL from a held one.
    assert took[0] > 4 * sys.getswitchinterval(), ("the load is long enough to tell", took[0])
    assert longest < took[0] / 2, (longest, took[0])


def test_rank_summaries_merge_to_the_job_report(cli, tmp_path):
    traces = sorted(STRAGGLER.glob("*.pt.trace.json*"))
    texts = [tracehound.rank_summary(p) for p in traces]
    # Ray's map, on one thread, writes the same summaries.
    from tracehound import _tracehound
    assert [_tracehound.map_rank(str(p), threads=1) for p in traces] == [(t, None) for t in texts]
    assert tracehound.merge(texts) == cli_json(cli, "analyze", STRAGGLER)
    # The CLI reads the package's summaries and the other way round.
    files = []
    for k, text in enumerate(texts):
        f = tmp_path / f"r{k}.json"
        f.write_text(text)
        files.append(f)
    assert cli_json(cli, "merge", *files) == tracehound.merge(files)
    assert tracehound.merge(files, format="table") == cli("analyze", STRAGGLER)[1]
    with pytest.raises(tracehound.TracehoundError, match="not a tracehound rank summary"):
        tracehound.merge(['{"kind": "something else"}'])


def test_eight_rank_job_from_the_shared_set(cli):
    job = shared("kineto-jobs/dlrm_v100_8ranks")
    texts = [tracehound.rank_summary(p) for p in sorted(job.iterdir())]
    assert tracehound.merge(texts) == cli_json(cli, "analyze", job)
