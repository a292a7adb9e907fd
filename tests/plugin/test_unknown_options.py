"""A misspelt option names itself and the closest known options in their documented casing on the
first line; the full list comes after. (The option parser only: no Spark.)"""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from spark_windowing.datasource.source.parse import _DOCUMENTED, KNOWN_OPTIONS, parse_options
from spark_windowing.errors import OptionError, UnknownOptionError

BASE = {"source": "generator", "window": "tumbling(1 minute)", "aggregate": "count(*) AS n"}
OPTIONS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "options.md"


def _error(name: str) -> UnknownOptionError:
    with pytest.raises(UnknownOptionError) as e:
        parse_options({**BASE, name: "x"})
    return e.value


@pytest.mark.parametrize("typo,meant", [
    ("acumulationMode", "accumulationMode"),
    ("ACCUMULATIONMODE_", "accumulationMode"),   # Spark lower-cases keys; casing never matters
    ("watermarkIdleTimout", "watermarkIdleTimeout"),
    ("allowedLatenes", "allowedLateness"),
    ("kafkaConsumer.pollTimeoutMillis", "kafkaConsumer.pollTimeoutMs"),
])
def test_typo_suggests_the_documented_spelling(typo, meant):
    e = _error(typo)
    first, *rest = str(e).splitlines()
    assert first.startswith(f"unknown option '{typo}': did you mean '{meant}'")
    assert len(first) < 160 and rest and "lateDataPath" in rest[0]  # the list, documented casing, later
    assert isinstance(e, OptionError) and (e.option, e.value) == (typo, "x") and meant in e.suggestions


def test_nothing_close_suggests_nothing():
    first = str(_error("colour")).splitlines()[0]
    assert first == "unknown option 'colour' (no known option is close)"


def test_error_survives_pickling():  # raised in Spark's Python workers too
    e = pickle.loads(pickle.dumps(_error("acumulationMode")))
    assert str(e).startswith("unknown option 'acumulationMode': did you mean 'accumulationMode'?")


def test_known_options_are_documented_as_spelled():
    """Every option the reader accepts has one documented spelling, and the options reference
    (docs/options.md) spells each the same."""
    assert set(_DOCUMENTED) == KNOWN_OPTIONS
    documented = set(re.findall(r"^\| `([A-Za-z0-9.]+)`", OPTIONS_PAGE.read_text(), re.M))
    assert all(_DOCUMENTED[d.lower()] == d for d in documented if d.lower() in _DOCUMENTED)
    assert {d.lower() for d in documented} >= KNOWN_OPTIONS


WINDOW_DF_PAGE = Path(__file__).resolve().parents[2] / "docs" / "window-dataframe.md"


def test_window_df_errors_spell_every_option_as_documented():
    """``window(df)``'s own options (``noDataBatches``, ``checkpointLocation``) are spelled as its
    page documents them, in the suggestion and in the list, like the reader's."""
    from spark_windowing.datasource.window_options import WINDOW_OPTIONS, _check_names
    with pytest.raises(UnknownOptionError) as e:
        _check_names({"noDataBatch": "false"})
    first, rest = str(e.value).splitlines()
    assert first == "unknown option 'noDataBatch': did you mean 'noDataBatches'?"
    listed = rest.split("window(df): ", 1)[1].split(", ")
    assert {n.lower() for n in listed} == set(WINDOW_OPTIONS)
    own = set(re.findall(r"^\| `([A-Za-z]+)`", WINDOW_DF_PAGE.read_text(), re.M))
    assert own >= {"noDataBatches", "checkpointLocation"} and own <= set(listed)   # the page's own table
