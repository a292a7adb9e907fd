"""examples/kafka_clicks.py end to end against the session's real broker: it produces clicks
into a new topic, reads them with ``source=kafka`` into the pane sink, and puts its malformed
records into the late-data table with topic, partition and offset."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.spark.test_examples import example  # noqa: F401  (the fixture)

pytestmark = pytest.mark.spark


def test_kafka_clicks_example(spark, kafka_broker, example, tmp_path, capsys):  # noqa: F811
    clicks = example("kafka_clicks")
    out = clicks.main(["--bootstrap", kafka_broker.bootstrap, "--events", "600",
                       "--output", str(tmp_path / "kc")], spark=spark)
    printed = capsys.readouterr().out
    triggers = DeltaTable(out.table("triggers")).to_pyarrow_table()
    timings = set(triggers.column("pane_timing").to_pylist())
    assert {"EARLY", "ON_TIME"} <= timings
    users = {k.decode() for k in triggers.column("key").to_pylist()}
    assert users and all(u.startswith("user-") for u in users)
    late = DeltaTable(out.late).to_pyarrow_table().to_pylist()
    malformed = [r for r in late if r["reason"] == "malformed"]
    assert len(malformed) == 3 and all(r["topic"].startswith("clicks-") and r["offset"] >= 0 for r in malformed)
    assert "Malformed records (late-data table)" in printed and "[clicks] batch 0 |" in printed
    assert Path(out.panes).exists()
