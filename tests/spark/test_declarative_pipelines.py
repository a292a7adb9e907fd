"""The clickstream example as a Spark Declarative Pipeline (``examples/clickstream_pipeline``),
run with ``spark-pipelines`` (its own local Spark Connect server, ``--remote 'local[2]'``), one
Spark at a time: a dry run with a misspelt option, a first run, a re-run over more input, and a
full refresh over other input; the reference is the same query run with ``writeStream``
(``_pipeline_reference_job.py``). Each run is ``availableNow``: bounded, whatever the machine's speed.

Checked: the pane tables and the streaming table of panes equal the ``writeStream`` run's; the
materialized view equals the sink's ``current``; the re-run resumes (no duplicate pane, the first
run's panes kept); the full refresh rebuilds the tables from fresh state (the state location holds
the new run only, the new run's late rows are appended, the tables equal a first run on the new
input); a dry run fails naming the misspelt option.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable

from spark_windowing.datasource.source import runs

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "clickstream_pipeline"
REFERENCE_JOB = Path(__file__).with_name("_pipeline_reference_job.py")
#: generous: a run takes 0.5-3 minutes on two busy cores; the runs are bounded (availableNow)
TIMEOUT_S = 1800
#: columns a re-run or another process may change: when the batch ran
VOLATILE = {"batch_time"}


def _pipeline_copy(dest: Path, *, total_events: int, seed: int) -> Path:
    """The example folder copied to ``dest``, its storage and outputs under ``dest``."""
    if not dest.exists():
        shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    spec = (EXAMPLE / "spark-pipeline.yml").read_text()
    spec = spec.replace("file:///tmp/clickstream_pipeline/storage", (dest / "storage").as_uri())
    spec = spec.replace("/tmp/clickstream_pipeline/out", str(dest / "out"))
    spec = re.sub(r'clickstream.totalEvents: "\d+"', f'clickstream.totalEvents: "{total_events}"', spec)
    spec = re.sub(r'clickstream.seed: "\d+"', f'clickstream.seed: "{seed}"', spec)
    (dest / "spark-pipeline.yml").write_text(spec)
    return dest


def _env() -> dict[str, str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def _spark_pipelines(folder: Path, *args: str) -> subprocess.CompletedProcess:
    cli = shutil.which("spark-pipelines", path=str(Path(sys.executable).parent)) or shutil.which("spark-pipelines")
    if cli is None:
        pytest.skip("spark-pipelines (pyspark >= 4.1) is not installed")
    command = [cli, *args, "--remote", "local[2]", "--conf", "spark.ui.enabled=false",
               "--conf", f"spark.sql.warehouse.dir={folder / 'warehouse'}",
               "--conf", "spark.sql.catalogImplementation=hive"]
    return subprocess.run(command, cwd=folder, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S)


def _ok(done: subprocess.CompletedProcess) -> None:
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]


def _rows(table: pa.Table, drop: set[str] = VOLATILE) -> list[str]:
    """Rows as sorted JSON, timestamps as µs (Delta's are UTC, the pipeline's parquet tables naive)."""
    columns = {}
    for name in table.column_names:
        if name in drop:
            continue
        column = table[name]
        if pa.types.is_timestamp(column.type):
            column = pc.cast(column.cast(pa.timestamp("us", tz=column.type.tz)), pa.int64())
        columns[name] = column
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in pa.table(columns).to_pylist())


def _delta(path: Path) -> pa.Table:
    return DeltaTable(str(path)).to_pyarrow_table()


def _warehouse(folder: Path, table: str) -> pa.Table:
    """A pipeline table (parquet under the warehouse; only files its commit log lists for a streaming table)."""
    log = folder / "warehouse" / table / "_spark_metadata"
    if log.exists():
        entries = sorted((p for p in log.iterdir() if p.name.split(".")[0].isdigit()),
                         key=lambda p: int(p.name.split(".")[0]))
        compacted = [i for i, p in enumerate(entries) if p.name.endswith(".compact")]
        entries = entries[compacted[-1]:] if compacted else entries   # a compaction lists every earlier file
        files = [json.loads(line)["path"] for f in entries for line in f.read_text().splitlines()[1:]]
        return ds.dataset([f.replace("file://", "") for f in files]).to_table()
    return ds.dataset(glob.glob(str(folder / "warehouse" / table / "*.parquet"))).to_table()


def _tables(panes: Path) -> dict[str, list[str]]:
    return {name: _rows(_delta(panes / name)) for name in ("triggers", "retractions", "current")}


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """Every run, once: the reference, the dry run, run 1 (1200 clicks), run 2 (2400: resumes), a
    full refresh over other clicks (seed 8). Returns what the tests compare."""
    tmp = tmp_path_factory.mktemp("sdp")
    ref = tmp / "reference"
    done = subprocess.run([sys.executable, str(REFERENCE_JOB), str(EXAMPLE), str(ref), "a:7:1200", "a:7:2400",
                           "b:8:2400"], env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    _ok(done)
    bad = _pipeline_copy(tmp / "bad", total_events=1200, seed=7)
    options = bad / "clickstream_options.py"
    options.write_text(options.read_text().replace('"window": "session(30 seconds)"', '"windw": "session(30 seconds)"'))
    dry = _spark_pipelines(bad, "dry-run")
    folder = _pipeline_copy(tmp / "pipeline", total_events=1200, seed=7)
    out = folder / "out"
    _ok(_spark_pipelines(folder, "run"))
    first = {"tables": _tables(out / "panes"), "panes": _rows(_warehouse(folder, "session_panes")),
             "run": runs.recorded_run(str(out / "state" / "session_panes"))}
    _pipeline_copy(folder, total_events=2400, seed=7)
    _ok(_spark_pipelines(folder, "run"))
    second = {"tables": _tables(out / "panes"), "panes": _warehouse(folder, "session_panes"),
              "live": _warehouse(folder, "live_sessions"), "current": _delta(out / "panes" / "current"),
              "run": runs.recorded_run(str(out / "state" / "session_panes")), "late": _rows(_delta(out / "late"))}
    _pipeline_copy(folder, total_events=2400, seed=8)
    shutil.rmtree(out / "panes")   # a sink is never truncated by a full refresh (docs/declarative-pipelines.md)
    _ok(_spark_pipelines(folder, "run", "--full-refresh-all"))
    refreshed = {"tables": _tables(out / "panes"), "panes": _warehouse(folder, "session_panes"),
                 "run": runs.recorded_run(str(out / "state" / "session_panes")),
                 "last_batch": runs.batch_state(str(out / "state" / "session_panes")),
                 "late": _rows(_delta(out / "late")), "live": _warehouse(folder, "live_sessions"),
                 "current": _delta(out / "panes" / "current")}
    return {"ref": ref, "dry": dry, "first": first, "second": second, "refreshed": refreshed, "folder": folder}


def _pane_rows(reference: Path) -> list[str]:
    """The reference's pane rows as the streaming table holds them: triggers and retractions."""
    rows = [r for name in ("triggers", "retractions") for r in _rows(_delta(reference / name))]
    return sorted(rows)


def _live(table: pa.Table) -> list[str]:
    return _rows(table.select(["user_id", "window_start", "window_end", "clicks", "pages", "pane_index"]))


def test_a_pipeline_dry_run_fails_naming_a_misspelt_option(pipeline):
    dry = pipeline["dry"]
    assert dry.returncode != 0
    assert "unknown option 'windw'" in dry.stdout + dry.stderr


def test_pipeline_pane_tables_equal_a_write_stream_run(pipeline):
    second, reference = pipeline["second"], pipeline["ref"] / "a" / "panes"
    assert second["tables"] == _tables(reference)
    assert len(second["tables"]["triggers"]) > 100 and second["tables"]["retractions"]
    panes = _rows(second["panes"])
    assert panes == _pane_rows(reference)     # the streaming table: every pane row, once
    assert _live(second["live"]) == _live(second["current"])    # the materialized view: current's windows


def test_a_pipeline_rerun_resumes_without_duplicates(pipeline):
    first, second = pipeline["first"], pipeline["second"]
    assert first["run"] == second["run"] is not None             # the same checkpoint's run
    assert set(first["tables"]["triggers"]) < set(second["tables"]["triggers"])
    assert set(first["panes"]) < set(_rows(second["panes"]))
    triggers = second["tables"]["triggers"]
    assert len(triggers) == len(set(triggers))
    keys = second["panes"].select(["user_id", "window_start", "window_end", "kind", "pane_index"])
    assert keys.num_rows == len({json.dumps(r, default=str) for r in keys.to_pylist()})


def test_a_pipeline_full_refresh_rebuilds_from_fresh_state(pipeline):
    second, refreshed, reference = pipeline["second"], pipeline["refreshed"], pipeline["ref"] / "b"
    assert refreshed["tables"] == _tables(reference / "panes")    # a first run over the new clicks
    assert _rows(refreshed["panes"]) == _pane_rows(reference / "panes")
    assert _live(refreshed["live"]) == _live(refreshed["current"])
    assert refreshed["run"] not in (None, second["run"])
    last_batch = max(json.loads(r)["batch_seq"] for r in _rows(refreshed["panes"]))
    assert refreshed["last_batch"] == last_batch                # nothing of the old run's state is left
    late_b = _rows(_delta(reference / "late"))
    assert late_b and set(late_b) <= set(refreshed["late"])      # the new run's late rows were appended
    assert set(second["late"]) <= set(refreshed["late"])          # the old run's stay
    checkpoints = pipeline["folder"] / "storage" / "_checkpoints" / "spark_catalog" / "default" / "session_panes"
    assert sorted(os.listdir(next(checkpoints.iterdir()))) == ["0", "1"]   # SDP's new checkpoint of the flow
