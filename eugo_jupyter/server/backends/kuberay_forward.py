"""A port-forward the server holds: local 127.0.0.1 ports that reach a pod's ports.

Each local port is a listening socket; every connection accepted on it opens one port-forward
stream to the pod through ``open_stream(remote_port)`` (the Kubernetes client's port-forward over
the API server's websocket, ``kubernetes.stream.portforward``: one websocket per connection,
as kubectl's own port-forward does over its stream protocol) and copies bytes both ways until
either side closes. Threads, one per listener and one per connection; :meth:`Forward.close`
ends them all.

>>> import socket
>>> fwd = Forward(lambda port: None, (6379,))   # doctest: +SKIP
>>> fwd.local(6379)                             # doctest: +SKIP
41233
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Forward"]


class Forward:
    """Local ports for ``remote_ports`` of one pod, open until :meth:`close`."""

    def __init__(
        self, open_stream: Callable[[int], Any], remote_ports: tuple[int, ...], name: str = ""
    ) -> None:
        self.name = name  # what it reaches (the pod's name)
        self._open = open_stream
        self._closed = threading.Event()
        self._listeners: dict[int, socket.socket] = {}
        self._open_socks: set[Any] = set()
        self._lock = threading.Lock()
        for remote in remote_ports:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", 0))
            listener.listen(64)
            self._listeners[remote] = listener
            threading.Thread(
                target=self._accept,
                args=(listener, remote),
                daemon=True,
                name=f"eugo port-forward :{remote}",
            ).start()

    def local(self, remote_port: int) -> int:
        """The 127.0.0.1 port that reaches ``remote_port`` of the pod."""
        return int(self._listeners[remote_port].getsockname()[1])

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def _accept(self, listener: socket.socket, remote: int) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(conn, remote), daemon=True).start()

    def _serve(self, conn: socket.socket, remote: int) -> None:
        stream = None
        try:
            stream = self._open(remote)
            pod = stream.socket(remote)
            with self._lock:
                self._open_socks.update((conn, pod))
            _pump(conn, pod, self._closed)
        except Exception:  # noqa: BLE001 - a failed stream ends this connection only
            pass
        finally:
            with self._lock:
                self._open_socks.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.close()

    def close(self) -> None:
        """Stop listening and end every open connection."""
        self._closed.set()
        for listener in self._listeners.values():
            with contextlib.suppress(OSError):
                listener.close()
        with self._lock:
            socks, self._open_socks = list(self._open_socks), set()
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


def _pump(a: Any, b: Any, closed: threading.Event) -> None:
    """Copy bytes between ``a`` and ``b`` until one side ends or the forward closes."""
    peers = {a.fileno(): (a, b), b.fileno(): (b, a)}
    while not closed.is_set():
        ready, _, _ = select.select(list(peers), [], [], 0.5)
        for fd in ready:
            src, dst = peers[fd]
            data = src.recv(1 << 16)
            if not data:
                return
            dst.sendall(data)
