"""A loopback HTTP file server for download tests: Range requests, cut transfers, a request log."""

from __future__ import annotations

import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_RANGE = re.compile(r"bytes=(\d+)-")


class LoopbackServer:
    """Serves `files` ({URL path: bytes}) on an ephemeral port until `close`.

    `requests` lists (path, Range header or None) in arrival order.
    `cut_after[path] = n` makes the next answer for `path` announce the full
    length, send `n` bytes and close the connection, as a dropped link does.
    `ignore_range` answers every request with the whole file.
    """

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.cut_after: dict[str, int] = {}
        self.ignore_range = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server._answer(self)

            def log_message(self, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        path, asked = handler.path, handler.headers.get("Range")
        self.requests.append((path, asked))
        body = self.files.get(path)
        if body is None:
            handler.send_error(404)
            return
        start = 0
        match = _RANGE.fullmatch(asked or "")
        if match and not self.ignore_range:
            start = int(match[1])
            if start >= len(body):
                handler.send_error(416)
                return
            handler.send_response(206)
            handler.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            handler.send_response(200)
        handler.send_header("Content-Length", str(len(body) - start))
        handler.end_headers()
        cut = self.cut_after.pop(path, None)
        handler.wfile.write(body[start:] if cut is None else body[start:start + cut])
        handler.close_connection = True


def closed_port_url() -> str:
    """A loopback URL where nothing listens: connections are refused, as on a machine offline."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
