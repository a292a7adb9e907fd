"""The loopback sockets between Spark's JVM and our Python code get prompt ACKs and no Nagle delay
(``spark_windowing.datasource.loopback``); other sockets are left alone. Real sockets, no Spark:
the 40 ms stall they remove is measured in ``benchmarks/batch_breakdown.py`` (docs/performance.md),
not asserted here, since a time would depend on the machine."""

from __future__ import annotations

import socket
import sys

import pytest

from spark_windowing.datasource import loopback

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="descriptor listing: Linux")


@pytest.fixture
def connection():
    """A connected loopback TCP pair and the listening socket behind it."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    yield server, client, accepted
    for s in (client, accepted, server):
        s.close()


def _nodelay(sock: socket.socket) -> int:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


def test_connected_loopback_sockets_are_found_and_others_are_not(connection):
    server, client, accepted = connection
    a, b = socket.socketpair()         # a Unix socket pair: not TCP
    try:
        found = set(loopback.loopback_sockets())
        assert {client.fileno(), accepted.fileno()} <= found
        assert server.fileno() not in found           # listening: no peer
        assert a.fileno() not in found and b.fileno() not in found
    finally:
        a.close()
        b.close()


def test_prompt_turns_nagle_off_on_both_ends(connection):
    _, client, accepted = connection
    assert _nodelay(client) == 0 and _nodelay(accepted) == 0
    fds = loopback.prompt()
    assert {client.fileno(), accepted.fileno()} <= set(fds)
    assert _nodelay(client) == 1 and _nodelay(accepted) == 1
    client.sendall(b"still open")      # the option was set through a duplicate, closed since
    assert accepted.recv(16) == b"still open"


def test_acked_passes_every_item_through_in_order(connection):
    _, client, _ = connection
    items = iter(range(5))
    assert list(loopback.acked(items)) == [0, 1, 2, 3, 4]
    assert _nodelay(client) == 1


def test_acked_raises_what_the_input_raises(connection):
    def failing():
        yield 1
        raise ValueError("input broke")

    out = loopback.acked(failing())
    assert next(out) == 1
    with pytest.raises(ValueError, match="input broke"):
        next(out)


def test_an_ipv4_mapped_loopback_peer_counts_as_loopback():
    server = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        server.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        server.bind(("::", 0))
    except OSError:
        server.close()
        pytest.skip("no dual-stack IPv6 here")
    server.listen(1)
    client = socket.create_connection(("127.0.0.1", server.getsockname()[1]))
    accepted, peer = server.accept()
    try:
        assert peer[0].startswith("::ffff:127.")
        assert accepted.fileno() in loopback.loopback_sockets()
    finally:
        for s in (client, accepted, server):
            s.close()


def _own_non_loopback_address() -> str | None:
    """An address of this machine's own interfaces that is not loopback (traffic to it stays on
    the machine): the source address of a route out, found by connecting a UDP socket, which
    sends nothing."""
    import ipaddress
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.123", 9))        # TEST-NET-1: nothing is sent by a UDP connect
        host = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if ipaddress.ip_address(host).is_loopback else host


def test_a_peer_on_another_address_is_left_alone():
    host = _own_non_loopback_address()
    if host is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind((host, 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname())
    accepted, _ = server.accept()
    try:
        assert client.fileno() not in loopback.loopback_sockets()
        loopback.prompt()
        assert _nodelay(client) == 0
    finally:
        for s in (client, accepted, server):
            s.close()
