"""What the windowed source hands the windowed sink, as code both import.

The sink must know the windowing spec that produced the panes it writes (it records it with the
tables, refuses panes of another spec into them, and closes windows in ``current`` by the spec's
allowed lateness). Two routes carry it:

1. **The pane schema**: ``window_start``'s column metadata (``tables.pane_spec``), on every route
   and ``window(df)`` (the driver route hands Spark its Arrow batches with the metadata where
   Spark reads it back: ``source.driver.with_spark_metadata``).
2. **Spark's offset log and the state location's record**, for panes whose schema lost it (a
   transformation that drops column metadata; ``execution=driver`` queries of the releases that
   stripped it): the query's latest logged offset of its one windowed source names the state
   location (``OFFSET_STATE``), and that location's ``spec.json`` records the producing options
   (``RECORD_OPTIONS``).

This module owns route 2's formats: the offset's marker and fields (``source_offset`` builds
every offset the stream reader returns), the state record (``state_record``), and the sink's
reading of both (``produced_from_checkpoint``). ``tests/plugin/test_contract.py`` runs the real
reader's offsets through the sink's reading, so a change on one side alone fails it.

>>> off = source_offset(seq=3, state="/tmp/state", shards=2, up={"files": 4}, bt=10, wm=5)
>>> off[OFFSET_MARK], state_of_offset(json.dumps(off))
(1, '/tmp/state')
>>> state_of_offset('{"reservoir": 7}') is None     # another source's offset
True
"""

from __future__ import annotations

import json
from typing import Any

from spark_windowing.datasource import storage
from spark_windowing.datasource.storage.layout import spec_marker

__all__ = ["OFFSET_MARK", "OFFSET_FIELDS", "OFFSET_STATE", "OFFSET_RUN", "RECORD_OPTIONS", "source_offset",
           "state_of_offset", "state_record", "options_recorded_at", "produced_from_checkpoint"]

#: The key that marks an offset as the windowed source's (value: the offset format's version).
OFFSET_MARK = "windowed"
#: The key of the state location in an offset.
OFFSET_STATE = "state"
#: The key of the run in an offset: a random id the initial offset of a checkpoint draws and every
#: later offset carries, naming whose state a state location holds (``source.runs``). Absent from
#: the offsets of a checkpoint started before runs were recorded (release 0.1.0): they keep none.
OFFSET_RUN = "run"
#: Every offset's fields (a join or an upstream such as Kafka adds fields of its own).
OFFSET_FIELDS = (OFFSET_MARK, "seq", OFFSET_STATE, "shards", "up", "bt", "wm", "max_event", "max_col", "last_input")
#: The key of the producing options in a state location's ``spec.json``.
RECORD_OPTIONS = "options"


def source_offset(*, seq: int, state: str, shards: int, up: Any, bt: int, wm: int, max_event: int | None = None,
                  max_col: int | None = None, last_input: int | None = None, run: str | None = None,
                  **extra: Any) -> dict:
    """An offset of the windowed source: micro-batch ``seq``'s end (upstream position ``up``, batch
    time ``bt`` and watermark ``wm`` in µs), the state location and shard count, the maxima the
    next watermark is planned from, the checkpoint's ``run`` (None: a checkpoint of 0.1.0, which
    had none: the field stays absent) and ``extra`` fields (a join's, an upstream's)."""
    offset = {OFFSET_MARK: 1, "seq": seq, OFFSET_STATE: state, "shards": shards, "up": up, "bt": bt, "wm": wm,
              "max_event": max_event, "max_col": max_col, "last_input": last_input, **extra}
    if run is not None:
        offset[OFFSET_RUN] = run
    return offset


def state_of_offset(line: str) -> str | None:
    """The state location of one source's offset as Spark logs it (its JSON); None for another
    source's offset."""
    if not line.startswith("{") or f'"{OFFSET_MARK}"' not in line:
        return None
    offset = json.loads(line)
    return offset.get(OFFSET_STATE) if OFFSET_MARK in offset else None


def state_record(*, fingerprint: str, shards: int, buckets: int, spec: dict, options: dict) -> bytes:
    """A state location's ``spec.json``: what its state was written with (the reader refuses a
    restart with other options) and the producing options (``RECORD_OPTIONS``, read by the sink)."""
    return json.dumps({"fingerprint": fingerprint, "shards": shards, "stateBuckets": buckets, "spec": spec,
                       RECORD_OPTIONS: options}, sort_keys=True, default=str).encode()


def options_recorded_at(state: str) -> dict | None:
    """The producing options recorded at state location ``state`` (None: none recorded)."""
    raw = storage.read_bytes(spec_marker(state), missing_ok=True)
    return (json.loads(raw).get(RECORD_OPTIONS) or None) if raw else None


def produced_from_checkpoint(checkpoint: str | None) -> dict | None:
    """The producing options of the panes of the query checkpointed at ``checkpoint``: its latest
    logged offset (``<checkpoint>/offsets/<batch>``: a version line, the batch's metadata, one line
    per source) of its one windowed source names the state location, whose record holds them.
    None: no checkpoint, no batch logged yet, not exactly one windowed source, or a checkpoint URI
    this process cannot open (e.g. ``s3a://``)."""
    if not checkpoint:
        return None
    try:
        offsets = checkpoint.rstrip("/") + "/offsets"
        batches = [int(i.base_name) for i in storage.list_dir(offsets) if i.base_name.isdigit()]
        raw = storage.read_bytes(f"{offsets}/{max(batches)}", missing_ok=True) if batches else None
        states = {state_of_offset(x) for x in (raw.decode().splitlines()[2:] if raw else [])} - {None}
        if len(states) != 1:
            return None
        return options_recorded_at(states.pop())
    except Exception:   # a checkpoint URI pyarrow cannot open: unknown, as without metadata
        return None
