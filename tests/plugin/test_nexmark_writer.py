"""``python -m spark_windowing.tools.nexmark``: NEXMark events written as Parquet files or a Delta
table hold exactly the rows ``source=nexmark`` generates, in stream order; ``--rate`` paces them.
Kafka: ``tests/spark/test_nexmark_kafka.py`` (the test broker)."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from spark_windowing.errors import OptionError
from spark_windowing.datasource.upstreams.nexmark_events import NexmarkConfig, generate
from spark_windowing.tools import nexmark as writer

G = NexmarkConfig(total_events=5_000, events_per_second=1_000, seed=3)


def test_parquet_files_hold_the_generated_rows_in_stream_order(tmp_path):
    seen = []
    rows = writer.write(G, "bid", f"parquet:{tmp_path}", 5_000, chunk=1_200, progress=lambda d, r: seen.append(d))
    names = sorted(os.listdir(tmp_path))
    assert names == [f"part-{s:012d}.parquet" for s in range(0, 5_000, 1_200)] and seen[-1] == 5_000
    mtimes = [os.stat(tmp_path / n).st_mtime_ns for n in names]
    assert mtimes == sorted(mtimes)
    got = pa.concat_tables([pq.read_table(tmp_path / n) for n in names])
    assert got.equals(generate(G, 0, 5_000, "bid")) and rows == got.num_rows


def test_a_delta_table_gets_one_commit_per_chunk(tmp_path):
    writer.write(G, "auction", f"delta:{tmp_path}", 5_000, chunk=2_000)
    table = DeltaTable(str(tmp_path))
    assert table.version() == 2   # three chunks: versions 0, 1, 2
    assert table.to_pyarrow_table().sort_by("id").equals(generate(G, 0, 5_000, "auction").sort_by("id"))


def test_a_rate_paces_the_chunks(tmp_path):
    """At 10,000 positions a second, the chunk from position 3,000 is written no earlier than
    0.3 s in (a lower bound: a slow machine only takes longer)."""
    started = time.monotonic()
    writer.write(G, "person", f"parquet:{tmp_path}", 4_000, rate=10_000)
    assert time.monotonic() - started >= 0.3
    assert len(os.listdir(tmp_path)) == 4   # chunks of rate / 10 = 1,000 positions


@pytest.mark.parametrize("target,fragment", [
    ("parquet", "parquet:<directory>"), ("csv:/tmp/x", "parquet:<directory>"),
    ("kafka:127.0.0.1:9092", "kafka needs <bootstrap servers>/<topic>"),
])
def test_bad_targets_name_the_accepted_forms(target, fragment):
    with pytest.raises(OptionError) as e:
        writer.write(G, "bid", target, 10)
    assert "'--to'" in str(e.value) and fragment in str(e.value)


def test_the_command_line_writes_and_reports(tmp_path, capsys):
    assert writer.main(["--events", "1000", "--to", f"parquet:{tmp_path}", "--events-per-second", "1000",
                        "--seed", "3"]) == 0
    assert "wrote 920 bid rows" in capsys.readouterr().err
    assert pq.read_table(tmp_path).equals(generate(NexmarkConfig(total_events=1_000, events_per_second=1_000, seed=3),
                                                   0, 1_000, "bid"))
