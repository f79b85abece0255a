"""A TCP proxy in front of a local S3 server that gives each request a round trip.

On loopback a request costs the server's and the client's CPU only, so a tool that sends
forty requests before its first byte looks as fast as one that sends four. A real
region answers a small request in 10-50 ms. This proxy holds each request ``rtt_s``
before passing it on (the body's later chunks are not held: bandwidth is loopback's),
one connection at a time as a real network would, and counts the requests it saw by
method, so a benchmark can show what a run's requests cost where they are not free.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from collections import Counter

#: The start of an HTTP/1.1 request (a body that happens to hold one is not expected
#: in benchmark data: random bytes and small JSON documents).
_REQUEST = re.compile(rb"(GET|PUT|POST|HEAD|DELETE) \S+ HTTP/1\.1\r\n")


class RttProxy:
    """127.0.0.1:<port> -> ``target``; each request held ``rtt_s`` seconds."""

    def __init__(self, target: tuple[str, int], rtt_s: float) -> None:
        self.target = target
        self.rtt_s = rtt_s
        self.requests: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset(self) -> Counter[str]:
        """The requests counted since the last reset."""
        with self._lock:
            seen, self.requests = self.requests, Counter()
        return seen

    def close(self) -> None:
        self._closed.set()
        self.listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False),
                             daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        try:
            while True:
                chunk = src.recv(256 * 1024)
                if not chunk:
                    break
                if requests:
                    starts = _REQUEST.findall(chunk[:4096] if len(chunk) > 4096 else chunk)
                    if starts and chunk[:8].split(b" ", 1)[0] in (
                            b"GET", b"PUT", b"POST", b"HEAD", b"DELETE"):
                        with self._lock:
                            self.requests.update(m.decode() for m in starts)
                        time.sleep(self.rtt_s)
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
