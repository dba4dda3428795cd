"""TLS on a connection of the HTTP server, with buffers the server chooses.

asyncio's own TLS (``StreamWriter.start_tls``) gives every connection a 256 KiB read buffer
(``asyncio.sslproto.SSLProtocol.max_size``) the moment the handshake starts, before the client
has sent a byte. 500 TCP connections that never sent a ClientHello raised the agent from 51 to
202 MiB, three waves to 361 MiB, never given back (issue 39; the chart's limit is 128 MiB).

Here the TLS state is an ``ssl.SSLObject`` over two ``MemoryBIO``s, fed from the plain stream
in reads of at most one TLS record (``RECORD_BYTES``), and made only once the client has sent
its first bytes: a silent connection costs what a plain one does. What a connection can hold
is then one record in, what OpenSSL keeps per connection, and the response being written.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

# A TLS record carries at most 2^14 bytes of data, plus its header and the cipher's overhead
# (RFC 8446 5.2: at most 2^14 + 256 for TLS 1.3; RFC 5246 6.2.3: 2^14 + 2048 for TLS 1.2).
RECORD_BYTES = 2**14 + 2048


class TlsStream:
    """The server side of one TLS connection over ``reader`` / ``writer``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 context: ssl.SSLContext) -> None:
        self._reader = reader
        self._writer = writer
        self._context = context
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl: ssl.SSLObject | None = None

    async def hello(self) -> None:
        """Wait for the client's first bytes (nothing is allocated for TLS before them);
        ``asyncio.IncompleteReadError`` when it leaves first."""
        first = await self._reader.read(RECORD_BYTES)
        if not first:
            raise asyncio.IncompleteReadError(b"", None)  # closed before a ClientHello
        self._incoming.write(first)

    async def negotiate(self) -> None:
        """The handshake, after :meth:`hello`; raises ``ssl.SSLError`` (an ``OSError``) when
        the client fails or leaves."""
        self._ssl = self._context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        while True:
            try:
                self._ssl.do_handshake()
            except ssl.SSLWantReadError:
                self._flush()
                await self._fill()
                continue
            self._flush()
            return

    async def read(self, limit: int) -> bytes:
        """Up to ``limit`` bytes of data; b"" when the client closed."""
        assert self._ssl is not None
        while True:
            try:
                data = self._ssl.read(limit)
            except ssl.SSLWantReadError:
                self._flush()
                if not await self._fill():
                    return b""
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""  # close_notify, or the client just closed the socket
            self._flush()
            return data

    def write(self, data: bytes) -> None:
        assert self._ssl is not None
        view = memoryview(data)
        while view:
            view = view[self._ssl.write(view):]
            self._flush()  # record by record: what waits is the socket's, not a copy here

    async def drain(self) -> None:
        await self._writer.drain()

    def close(self) -> None:
        """Say close_notify where the connection allows; the socket is closed by the caller."""
        if self._ssl is not None:
            with contextlib.suppress(ssl.SSLError, ValueError):
                self._ssl.unwrap()
            with contextlib.suppress(OSError, RuntimeError):
                self._flush()

    async def _fill(self) -> bool:
        data = await self._reader.read(RECORD_BYTES)
        if not data:
            self._incoming.write_eof()
            return False
        self._incoming.write(data)
        return True

    def _flush(self) -> None:
        data = self._outgoing.read()
        if data:
            self._writer.write(data)
