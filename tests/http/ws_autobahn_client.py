"""autobahn's asyncio WebSocket client (Debian python3-autobahn, run with
/usr/bin/python3) against spindle's echo endpoints, for
tests/http/test_ws_autobahn.c: a second client implementation beside
ws_peer.py's `websockets`.

    ws_autobahn_client.py MODE URL

prints one line per check, each saying what autobahn saw, and exits 0
when the script ran to its end (the C test judges the lines). A check
that times out or goes wrong ends the script with an exception (exit 1).
Every connection ends with a line "close CLEAN CODE REASON" from
autobahn's onClose. Modes:

    echo        text and binary messages of 1, 65536 and 307200 bytes
    fragments   messages autobahn sends in frames of fragmentSize bytes
    ping        pings answered by pongs, then autobahn's automatic pings
    deflate     permessage-deflate offered; the agreed header, messages
                compressed both ways
    too-big     a message over the endpoint's limit, whole and fragmented
    bad-utf8    a text message that is not UTF-8
    close       the client closes with 1000 and a reason; then the server
                closes (the endpoint's "close" command)
"""
import asyncio
import sys
from urllib.parse import urlparse

from autobahn.asyncio.websocket import WebSocketClientFactory, WebSocketClientProtocol
from autobahn.websocket.compress import (PerMessageDeflateOffer,
                                         PerMessageDeflateResponseAccept)

WAIT = 10  # seconds for any one event


class Peer(WebSocketClientProtocol):
    """Turns autobahn's callbacks into events on the factory's queue."""

    def onConnect(self, response):
        self.factory.events.put_nowait(("connect", response))

    def onOpen(self):
        self.factory.events.put_nowait(("open",))

    def onMessage(self, payload, isBinary):
        self.factory.events.put_nowait(("message", payload, isBinary))

    def onPong(self, payload):
        self.factory.events.put_nowait(("pong", payload))

    def onClose(self, wasClean, code, reason):
        self.factory.events.put_nowait(("close", wasClean, code, reason))


class Conn:
    """One connection and the events it has not taken yet."""

    def __init__(self, factory, proto):
        self.factory, self.ws = factory, proto

    async def next(self, kind):
        """The next event, which must be of this kind (pongs to autobahn's
        automatic pings are passed over while waiting for others)."""
        ev = await asyncio.wait_for(self.factory.events.get(), WAIT)
        while ev[0] == "pong" and kind != "pong" and self.ws.autoPingInterval:
            ev = await asyncio.wait_for(self.factory.events.get(), WAIT)
        assert ev[0] == kind, "wanted %s, got %r" % (kind, ev[:3])
        return ev[1:]

    async def echo(self, payload, binary, **send):
        self.ws.sendMessage(payload, isBinary=binary, **send)
        got, got_binary = await self.next("message")
        assert got_binary == binary, "binary=%s came back as %s" % (binary, got_binary)
        assert got == payload, "%d bytes came back as %d different ones" % (len(payload), len(got))

    async def closed(self):
        clean, code, reason = await self.next("close")
        print("close", clean, code, reason)


async def connect(url, **options):
    factory = WebSocketClientFactory(url)
    factory.protocol = Peer
    factory.events = asyncio.Queue()
    factory.setProtocolOptions(openHandshakeTimeout=WAIT, closeHandshakeTimeout=WAIT,
                               **options)
    u = urlparse(url)
    _, proto = await asyncio.get_running_loop().create_connection(factory, u.hostname,
                                                                  u.port)
    c = Conn(factory, proto)
    await c.next("connect")
    await c.next("open")
    return c


def text(n):
    """n bytes of UTF-8, two of every four in a three-byte character (the
    fragment sizes below split some of them)."""
    return ("a\u20ac" * (n // 4)).encode() + b"a" * (n % 4)


SIZES = [1, 65536, 307200]


async def echo(url):
    c = await connect(url)
    for n in SIZES:
        await c.echo(text(n), False)
        print("text", n, "ok")
        await c.echo(bytes(range(256)) * (n // 256) + b"\xff" * (n % 256), True)
        print("binary", n, "ok")
    c.ws.sendClose(1000, "done")
    await c.closed()


async def fragments(url):
    c = await connect(url)
    for payload, binary, size in [(text(10000), False, 1001), (bytes(range(256)) * 1200, True, 4096),
                                  (text(40), False, 1)]:
        before = c.ws.trafficStats.outgoingWebSocketFrames
        await c.echo(payload, binary, fragmentSize=size)
        frames = c.ws.trafficStats.outgoingWebSocketFrames - before
        print("binary" if binary else "text", len(payload), "in", frames, "frames ok")
    c.ws.sendClose(1000, "done")
    await c.closed()


async def ping(url):
    c = await connect(url)
    for payload in [b"are you there", b"", bytes(range(125))]:
        c.ws.sendPing(payload)
        got, = await c.next("pong")
        assert got == payload, got
        print("pong", len(payload), "ok")
    c.ws.sendClose(1000, "done")
    await c.closed()
    # autobahn's own pings: every 50 ms, the connection dropped by
    # autobahn if a pong is not back within 2 s.
    c = await connect(url, autoPingInterval=0.05, autoPingTimeout=2)
    for _ in range(3):
        await c.next("pong")
    print("auto pings answered")
    c.ws.sendClose(1000, "done")
    await c.closed()


def accept_deflate(response):
    return PerMessageDeflateResponseAccept(response)


async def deflate(url):
    offers = [("default", PerMessageDeflateOffer()),
              ("no-context", PerMessageDeflateOffer(request_no_context_takeover=True,
                                                    request_max_window_bits=10))]
    for name, offer in offers:
        c = await connect(url, perMessageCompressionOffers=[offer],
                          perMessageCompressionAccept=accept_deflate)
        print(name, "agreed:", c.ws.http_headers.get("sec-websocket-extensions"))
        assert c.ws._perMessageCompress is not None, "autobahn did not take the answer"
        stats = c.ws.trafficStats
        for payload, binary in [(b"x", True), (text(307200), False),
                                (bytes(range(256)) * 400, True), (text(100), False)]:
            await c.echo(payload, binary)
        # The server's messages came compressed (and it inflated autobahn's).
        ratio = stats.incomingOctetsWebSocketLevel / stats.incomingOctetsAppLevel
        assert ratio < 0.25, ratio
        print(name, "echo ok, compressed")
        c.ws.sendClose(1000, "done")
        await c.closed()


async def too_big(url):
    c = await connect(url)
    await c.echo(b"\0" * 1000, True)
    print("1000 ok")
    c.ws.sendMessage(b"\0" * 2000, isBinary=True)
    await c.closed()
    c = await connect(url)
    c.ws.sendMessage(b"\0" * 1200, isBinary=True, fragmentSize=600)
    await c.closed()


async def bad_utf8(url):
    c = await connect(url)
    c.ws.sendMessage(b"ok \xc3\x28", isBinary=False)
    await c.closed()


async def close(url):
    c = await connect(url)
    await c.echo(b"hi", False)
    c.ws.sendClose(1000, "fin \u03ba")
    await c.closed()
    c = await connect(url)
    c.ws.sendMessage(b"close")
    await c.closed()


MODES = {"echo": echo, "fragments": fragments, "ping": ping, "deflate": deflate,
         "too-big": too_big, "bad-utf8": bad_utf8, "close": close}

if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)
    asyncio.run(asyncio.wait_for(MODES[sys.argv[1]](sys.argv[2]), 60))
