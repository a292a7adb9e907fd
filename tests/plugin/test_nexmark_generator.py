"""The NEXMark generator (``spark_windowing.datasource.upstreams.nexmark_events``) against the rules of Beam's Java generator:
kinds 1 : 3 : 46 per 50 events, ids from 1000, the hot auction, bidder and seller shares, prices,
expiry; and what makes it a stream source: every event the same whatever batch generates it,
every event emitted exactly once with delays and out-of-order groups."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from spark_windowing.datasource.upstreams.nexmark_events import BASE_TIME, NexmarkConfig, generate

N = 50_000
G = NexmarkConfig(total_events=N)


def test_kinds_come_one_three_fortysix_per_fifty_with_ids_from_1000():
    persons, auctions, bids = (generate(G, 0, N, k) for k in ("person", "auction", "bid"))
    assert (persons.num_rows, auctions.num_rows, bids.num_rows) == (N // 50, 3 * N // 50, 46 * N // 50)
    assert persons.column("id").to_pylist() == list(range(1000, 1000 + N // 50))
    assert auctions.column("id").to_pylist() == list(range(1000, 1000 + 3 * N // 50))
    t = persons.column("date_time").cast(pa.int64()).to_numpy()
    assert t[0] == BASE_TIME and (np.diff(t) == 50 * 100).all()   # 10,000 events a second: 100 µs apart


def test_bids_go_to_hot_auctions_and_bidders_and_existing_people():
    bids = generate(G, 0, N, "bid")
    auction, bidder = bids.column("auction").to_numpy(), bids.column("bidder").to_numpy()
    hot_auction = ((auction - 1000) % 100 == 0).mean()
    hot_bidder = ((bidder - 1000) % 100 == 1).mean()
    assert 0.5 <= hot_auction < 0.56 and 0.75 <= hot_bidder < 0.8    # 1/2 and 3/4, plus cold hits
    assert auction.min() >= 1000 and auction.max() < 1000 + 3 * N // 50 + 10       # up to the lead
    price = bids.column("price").to_numpy()
    assert price.min() >= 100 and price.max() <= 100_000_000 and np.median(price) < 200_000   # log-uniform


def test_auctions_have_sellers_categories_and_expire_after_they_start():
    a = generate(G, 0, N, "auction")
    assert set(a.column("category").to_pylist()) == {10, 11, 12, 13, 14}
    assert ((a.column("seller").to_numpy() - 1000) % 100 == 0).mean() >= 0.75
    start, end = (a.column(c).cast(pa.int64()).to_numpy() for c in ("date_time", "expires"))
    assert (end > start).all() and (end - start).max() <= 2 * 1666 * 100 + 1
    assert (a.column("reserve").to_numpy() > a.column("initial_bid").to_numpy()).all()


@pytest.mark.parametrize("config", [G, NexmarkConfig(total_events=N, prob_delayed_event=0.1, out_of_order_group_size=7)])
def test_every_event_once_whatever_the_batches(config):
    for kind in ("person", "auction", "bid"):
        whole = generate(config, 0, N, kind)
        cuts = [0, 1, 999, 5000, 17_333, 40_000, N]
        parts = pa.concat_tables([generate(config, lo, hi, kind) for lo, hi in zip(cuts, cuts[1:])])
        assert parts.equals(whole)


def test_delayed_events_keep_their_time_and_arrive_behind_the_stream():
    delayed = NexmarkConfig(total_events=N, prob_delayed_event=0.1)
    d, plain = generate(delayed, 0, N, "bid"), generate(G, 0, N, "bid")
    assert sorted(d.column("date_time").to_pylist()) == sorted(plain.column("date_time").to_pylist())
    t = d.column("date_time").cast(pa.int64()).to_numpy()
    behind = np.maximum.accumulate(t) - t
    assert (behind > 0).mean() > 0.05 and behind.max() <= 3_000_000
