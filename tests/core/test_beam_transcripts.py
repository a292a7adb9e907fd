"""Apache Beam's trigger transcripts against spark_windowing.testing.TestStream.

The scenarios live in ``beam_scenarios.py`` (shared with ``test_reference_model.py``, which checks
that the reference model reproduces them too). Each runs non-keyed and with two identical keys;
the Default + accumulating ones also run with six keys whose input is re-bundled (original,
reversed, shuffled, 1-element, reversed 1-element, 2-element bundles), as Beam's TestStream
harness does: their panes must not depend on order or bundling.
"""

from __future__ import annotations

import pytest

from beam_scenarios import SCENARIOS, run_scenario, variants_for

from spark_windowing import testing

CASES = [pytest.param(s, v, id=f"{s.name}[{v}]") for s in SCENARIOS for v in variants_for(s)]


@pytest.mark.parametrize("scenario,variant", CASES)
def test_teststream_reproduces_beam_transcript(scenario, variant):
    run_scenario(scenario, testing.TestStream, variant)
