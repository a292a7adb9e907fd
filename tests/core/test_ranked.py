"""Ranked rows (``top``, ``bottom``, ``max_rows``, ``min_rows``) and values (``most_frequent``):
order, types, errors, joins. Their values against the reference model:
``test_properties.py::test_ranked_rows_match_reference_model`` and
``test_most_frequent_matches_reference_model``; over retracting input: ``test_inherit.py``."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from spark_windowing.aggregates.binding import bind_aggregates
from spark_windowing.aggregates.parsing import parse_aggregates
from spark_windowing.errors import OptionError
from spark_windowing.testing import TestStream

BIDS = pa.schema([("auction", pa.int64()), ("bidder", pa.int32()), ("price", pa.decimal128(10, 2)),
                  ("date_time", pa.timestamp("us", tz="UTC")), ("note", pa.string()), ("ts", pa.int64())])
T0 = dt.datetime(2015, 7, 15, tzinfo=dt.timezone.utc)


def _bids(rows):
    return pa.Table.from_pylist([dict(zip(BIDS.names, r)) for r in rows], schema=BIDS)


def test_ties_are_kept_best_first_then_by_columns_nulls_first_duplicates_twice():
    s = TestStream(window="tumbling(10 milliseconds)", timestamp_column="ts",
                   aggregate="top(2, price, note, auction) AS t, min_rows(price, auction) AS lo")
    s.add_elements(_bids([(3, 1, Decimal("9.50"), T0, "b", 1), (1, 1, Decimal("9.50"), T0, None, 2),
                          (2, 1, Decimal("9.50"), T0, "a", 3), (2, 1, Decimal("9.50"), T0, "a", 4),
                          (4, 1, Decimal("1.00"), T0, "z", 5), (5, 1, Decimal("1.00"), T0, "y", 6),
                          (6, 1, None, T0, "n", 7)]))
    s.advance_watermark_to_infinity()
    (pane,) = s.take_panes()
    assert [(r["note"], r["auction"]) for r in pane["t"]] == [(None, 1), ("a", 2), ("a", 2), ("b", 3)]
    assert [(r["price"], r["auction"]) for r in pane["lo"]] == [(Decimal("1.00"), 4), (Decimal("1.00"), 5)]


def test_most_frequent_keeps_tied_counts_most_frequent_first_then_by_value_with_the_column_type():
    s = TestStream(window="tumbling(10 milliseconds)", timestamp_column="ts",
                   aggregate="most_frequent(1, note) AS hot, most_frequent(3, note) AS three, most_frequent(1, price)")
    notes = ["b", "a", "b", "a", "a", "b", "a", "b", "c", "c", "d", None, None, None, None, None]
    s.add_elements(_bids([(1, 1, Decimal("2.50"), T0, n, 1) for n in notes]))
    s.advance_watermark_to_infinity()
    (pane,) = s.take_panes()
    assert pane["hot"] == [{"note": "a", "count": 4}, {"note": "b", "count": 4}]   # nulls are no value
    assert [r["note"] for r in pane["three"]] == ["a", "b", "c"]                  # two values beat c
    assert pane["most_frequent(price)"] == [{"price": Decimal("2.50"), "count": 16}]


def test_the_struct_carries_the_columns_types():
    (bound,) = bind_aggregates(parse_aggregates("max_rows(price, auction, bidder, date_time, price)"), BIDS)
    (field,) = bound.output_fields()
    assert field.name == "max_rows(price)"
    assert field.type == pa.list_(pa.struct([("price", pa.decimal128(10, 2)), ("auction", pa.int64()),
                                             ("bidder", pa.int32()), ("date_time", pa.timestamp("us", tz="UTC"))]))
    s = TestStream(window="tumbling(10 milliseconds)", timestamp_column="ts",
                   aggregate="max_rows(price, auction, bidder, date_time) AS w")
    s.add_elements(_bids([(7, 3, Decimal("2.00"), T0, "x", 1), (8, 4, Decimal("2.00"), T0 + dt.timedelta(1), "x", 2)]))
    s.advance_watermark_to_infinity()
    assert s.take_panes()[0]["w"] == [
        {"price": Decimal("2.00"), "auction": 7, "bidder": 3, "date_time": T0},
        {"price": Decimal("2.00"), "auction": 8, "bidder": 4, "date_time": T0 + dt.timedelta(1)}]


def test_a_merged_session_ranks_the_rows_of_both_parts():
    """Each part kept only its candidates; the merged session's top 2 come from both."""
    s = TestStream(window="session(5 milliseconds)", timestamp_column="ts", key_columns="bidder",
                   aggregate="top(2, price, auction) AS t")
    s.add_elements(_bids([(1, 1, Decimal(5), T0, "", 1), (2, 1, Decimal(3), T0, "", 2), (3, 1, Decimal(1), T0, "", 3)]))
    s.add_elements(_bids([(4, 1, Decimal(4), T0, "", 10), (5, 1, Decimal(9), T0, "", 11)]))
    s.add_elements(_bids([(6, 1, Decimal(0), T0, "", 6)]))   # bridges [1, 8) and [10, 16)
    s.advance_watermark_to_infinity()
    assert [[r["auction"] for r in p["t"]] for p in s.take_panes()] == [[5, 1]]


@pytest.mark.parametrize("text,fragment", [
    ("top(0, price)", "first argument is how many ranks"),
    ("top(price, auction)", "first argument is how many ranks"),
    ("max_rows()", "needs the value column"),
    ("max_rows(price + 1)", "'price + 1' is not a column name"),
    ("bottom(2)", "needs the value column"),
    ("most_frequent(auction)", "first argument is how many ranks"),
    ("most_frequent(1, auction, bidder)", "takes one column"),
    ("most_frequent(1, count)", "not named 'count'"),
])
def test_bad_ranked_rows_fail_at_parse_naming_the_item(text, fragment):
    with pytest.raises(OptionError) as info:
        parse_aggregates(text)
    assert fragment in str(info.value)
    assert "max_rows(x, col, ...)" in str(info.value) and "most_frequent(n, x)" in str(info.value)


@pytest.mark.parametrize("text,fragment", [
    ("max_rows(price, seller)", "carries column 'seller', which is not an upstream column"),
    ("max_rows(nope, auction)", "column 'nope' is not an upstream column"),
])
def test_unknown_columns_fail_at_bind(text, fragment):
    with pytest.raises(OptionError) as info:
        bind_aggregates(parse_aggregates(text), BIDS, text)
    assert fragment in str(info.value)


def test_a_list_column_cannot_be_ranked():
    schema = pa.schema([("tags", pa.list_(pa.string())), ("ts", pa.int64())])
    with pytest.raises(OptionError, match="needs an orderable column"):
        bind_aggregates(parse_aggregates("max_rows(tags)"), schema)


def test_each_side_of_a_join_ranks_its_own_rows_under_its_own_column_names():
    schema = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
    s = TestStream(window="tumbling(10 milliseconds)", join="inner", key_columns="k", schema=schema, schema2=schema,
                   aggregate="max_rows(v, ts) AS hi1", aggregate2="min_rows(v, ts) AS lo2")
    rows = lambda vs: pa.Table.from_pylist([{"k": "a", "ts": t, "v": v} for t, v in vs], schema=schema)
    s.add_elements(rows([(1, 5), (2, 7)]), stream2=rows([(3, 4), (4, 2), (5, 2)]))
    s.advance_watermark_to(10)
    (pane,) = s.take_panes()
    assert pane["hi1"] == [{"v": 7, "ts": 2}]
    assert pane["lo2"] == [{"v": 2, "ts": 4}, {"v": 2, "ts": 5}]
