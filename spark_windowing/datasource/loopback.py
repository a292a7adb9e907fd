"""Prompt ACKs on the loopback sockets between Spark's JVM and the Python process running our code.

Spark talks to a Python worker (a task's ``mapInArrow``, a data source's ``read`` and ``write``)
and to its planning processes over a loopback TCP socket on which neither side disables Nagle's
algorithm (``PythonWorkerFactory`` and ``pyspark.daemon`` set no socket option). A message
written in two parts then waits for the ACK of the first: Nagle holds the second part back, and
the receiver delays its ACK by Linux's 40 ms minimum, since it has nothing to send. A sink task
reading an input of no rows (a schema message, then the end of the stream) waited **40 ms**, in
every task of every micro-batch; ``mapInArrow`` over 0, 100 or 100,000 rows waited 41 / 41 / 63
ms for its input, 1 / 6 / 22 ms with these options (pyspark 4.3, Linux). Spark fixed the same
stall between a ``transformWithState`` worker and its state server (SPARK-51667, TCP_NODELAY);
``spark.python.unix.domain.socket.enabled=true`` avoids TCP altogether (a Spark conf set before
the context starts: docs/performance.md).

From inside the Python process this module does the two halves it can:

* ``TCP_NODELAY`` on its loopback sockets: what it writes (pane batches, commit messages, the
  end of its output) goes out at once; the option stays on the socket, which a reused worker
  keeps for later tasks.
* ``TCP_QUICKACK`` before it blocks on input: an ACK the kernel is delaying goes out now, so the
  JVM's held-back part follows at once. Linux clears the option by itself, so it is set again
  before each wait (one ``setsockopt`` a batch).

Only TCP sockets whose peer is a loopback address are touched (Spark's own links; a Kafka or
S3 connection to another host is not), and only in processes Spark started to run this plugin's
code. Elsewhere (no ``/proc/self/fd`` or ``/dev/fd``, no ``TCP_QUICKACK``) it does what the
platform has, or nothing.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
from typing import Iterable, Iterator, TypeVar

__all__ = ["loopback_sockets", "prompt", "acked"]

_T = TypeVar("_T")
_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


def _fd_dir() -> str | None:
    for path in ("/proc/self/fd", "/dev/fd"):
        if os.path.isdir(path):
            return path
    return None


def _is_loopback(sock: socket.socket) -> bool:
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
        return False
    try:
        host = sock.getpeername()[0]
    except OSError:                    # not connected (a listening socket)
        return False
    address = ipaddress.ip_address(host.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def loopback_sockets() -> list[int]:
    """The file descriptors of this process's connected loopback TCP sockets."""
    fd_dir = _fd_dir()
    if fd_dir is None:
        return []
    found = []
    for name in os.listdir(fd_dir):
        fd = int(name)
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:                # closed meanwhile (the listing's own descriptor)
            continue
        try:
            if _is_loopback(sock):
                found.append(fd)
        finally:
            sock.close()               # the duplicate only
    return found


def _set(fds: Iterable[int], option: int) -> None:
    for fd in fds:
        try:
            with socket.socket(fileno=os.dup(fd)) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, option, 1)
        except OSError:
            pass                       # closed or not TCP any more: nothing to prompt


def prompt() -> list[int]:
    """Set ``TCP_NODELAY`` and ``TCP_QUICKACK`` on this process's loopback sockets (the module
    docstring); returns their descriptors for ``acked``."""
    fds = loopback_sockets()
    _set(fds, socket.TCP_NODELAY)
    if _QUICKACK is not None:
        _set(fds, _QUICKACK)
    return fds


def acked(items: Iterator[_T]) -> Iterator[_T]:
    """``items`` (an input Spark streams over a loopback socket), with the sockets prompted before
    each wait for the next item."""
    fds = prompt()
    if _QUICKACK is None or not fds:
        yield from items
        return
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        yield item
        _set(fds, _QUICKACK)
