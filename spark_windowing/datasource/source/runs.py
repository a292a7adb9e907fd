"""Whose state a state location holds: the run of a query's checkpoint.

Spark asks a source for its initial offset only when the query's checkpoint has no offset to
resume from: a first start, a deleted checkpoint, or a Spark Declarative Pipelines full refresh
(which gives the flow a new checkpoint directory and keeps the old one). The initial offset draws
a random ``run`` (``new_run``) and every later offset carries it (``contract.OFFSET_RUN``), so the
offsets Spark logs in a checkpoint name one run. The state location records the run whose state
it holds (``<stateLocation>/run.json``), at the first batch of the run (``claim``):

* the location holds no batch state (new, or only a run that never ran a batch): it is this run's;
* it holds this run's: a restart of the same checkpoint, nothing to do;
* it holds another run's (or state of a checkpoint of 0.1.0, which recorded no run): the new
  checkpoint would start at batch 0 over that state and mix it into its panes. Refused, naming
  ``stateLocation`` and the ways out, unless ``newCheckpoint=reset``: the old run's state is removed
  and the run starts over (a pipeline's full refresh).

A resumed checkpoint whose run no longer holds the location (another checkpoint took it over, e.g.
with ``newCheckpoint=reset``) is refused too: its state is gone (``check_resumed``). Offsets without
a run (a checkpoint of 0.1.0 resuming) are never checked, as before.

>>> len(new_run())
32
"""

from __future__ import annotations

import json
import uuid

from spark_windowing.datasource import storage
from spark_windowing.datasource.options.config import SourceConfig
from spark_windowing.datasource.storage import layout
from spark_windowing.errors import OptionError

__all__ = ["new_run", "claim", "check_resumed", "recorded_run", "batch_state"]

#: What a run leaves under its state location (all of it goes on ``newCheckpoint=reset``).
RUN_STATE = (layout.SHARDS_DIR, layout.REPORTS_DIR, layout.CLAIMS_DIR, layout.SOURCES_DIR, layout.SOURCES2_DIR,
             layout.SPEC_MARKER, layout.RUN_MARKER, layout.LATE_MARKER)

_WAYS_OUT = ("a stateLocation of its own for the new checkpoint; or the checkpoint that state was written with; "
             "or newCheckpoint=reset to remove that state and start over (a declarative pipeline's full refresh)")


def new_run() -> str:
    """A new run id (the initial offset's)."""
    return uuid.uuid4().hex


def recorded_run(state: str) -> str | None:
    """The run whose state ``state`` holds (None: none recorded)."""
    raw = storage.read_bytes(layout.run_marker(state), missing_ok=True)
    return json.loads(raw).get("run") if raw else None


def batch_state(state: str) -> int | None:
    """The last batch whose state or report ``state`` holds (0: state without a report; None: no
    batch state at all)."""
    shards = storage.list_dir(f"{state}/{layout.SHARDS_DIR}")
    seqs = [int(i.base_name) for i in storage.list_dir(layout.reports_dir(state)) if i.base_name.isdigit()]
    if seqs:
        return max(seqs)
    return 0 if shards else None


def claim(cfg: SourceConfig, run: str) -> None:
    """The first batch of ``run`` (a fresh checkpoint): the state location becomes the run's, or the
    run is refused (``newCheckpoint=refuse``) or the old state removed (``reset``)."""
    state = cfg.state_location
    recorded = recorded_run(state)
    if recorded == run:
        return
    last = batch_state(state)
    if last is not None:
        held = f"run {recorded}" if recorded else "a run of a checkpoint that recorded none (0.1.0)"
        if cfg.new_checkpoint != "reset":
            raise OptionError(
                "stateLocation", state, _WAYS_OUT,
                why=f"this query starts from a new checkpoint (its run {run}), but the state location holds the "
                    f"state of {held}, up to batch {last}; starting over at batch 0 on that state would mix it "
                    f"into the new run's panes")
        for name in RUN_STATE:
            storage.delete(f"{state}/{name}", recursive=True)
    storage.write_atomic(layout.run_marker(state), json.dumps({"run": run}).encode())


def check_resumed(cfg: SourceConfig, run: str) -> None:
    """A checkpoint of ``run`` resumes: its state location must still hold that run's state."""
    recorded = recorded_run(cfg.state_location)
    if recorded is not None and recorded != run:
        raise OptionError(
            "stateLocation", cfg.state_location, "the checkpoint of the run that holds it, or a new stateLocation "
            "with a new checkpoint",
            why=f"this checkpoint's run {run} no longer holds the state location: run {recorded} (another "
                f"checkpoint, e.g. a full refresh with newCheckpoint=reset) took it over and removed this run's state")
