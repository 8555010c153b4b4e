"""The other end for tests/http/test_ws.c: Python's `websockets` library
(Debian python3-websockets, run with /usr/bin/python3).

    ws_peer.py client URL   talks to spindle's echo endpoint, exits 0 if
                            every exchange came back as sent
    ws_peer.py server       an echo server on 127.0.0.1; prints its port,
                            serves until stdin closes. "close-me" is
                            answered with a close 4002 "bye".
    ws_peer.py tls-server PORT CERT KEY
                            the echo server over TLS (wss://) on
                            127.0.0.1:PORT with CERT and KEY (PEM); prints
                            "ready" and serves until it is terminated.
    ws_peer.py masked       a raw server for one connection: answers the
                            handshake, sends a masked frame (which a
                            server must not), prints its port first and
                            the close code it got back last.
    ws_peer.py client-deflate URL
                            permessage-deflate offered three ways (the
                            library's default, no context takeover both
                            ways, small windows): the answer checked, messages of 1
                            byte, 100 KB text and binary sent back; each
                            connection closed with 4001.
    ws_peer.py server-deflate VARIANT
                            the echo server with permessage-deflate:
                            "default" (the library's), "nct" (no context
                            takeover both ways), "bits" (windows of 10 and
                            9 bits). "ext?" is answered with what was
                            agreed.
    ws_peer.py answer EXT...
                            a raw server, one connection per EXT: answers
                            the handshake with Sec-WebSocket-Extensions:
                            EXT ("-": without the header), then closes.
"""
import asyncio
import base64
import hashlib
import socket
import ssl
import struct
import sys

import websockets
from websockets.extensions.permessage_deflate import (
    ClientPerMessageDeflateFactory, ServerPerMessageDeflateFactory)


async def client(url):
    async with websockets.connect(url, max_size=None, compression=None) as ws:
        await ws.send("hello, κόσμε")
        assert await ws.recv() == "hello, κόσμε"
        await ws.send(b"\x00\x01\xff" * 100)
        assert await ws.recv() == b"\x00\x01\xff" * 100
        big = bytes(range(256)) * 3000  # 768,000 bytes in 77 fragments
        await ws.send([big[i:i + 10000] for i in range(0, len(big), 10000)])
        assert await ws.recv() == big
        text = "λ" * 100000  # 200,000 bytes of text, fragments split nowhere odd
        await ws.send([text[i:i + 7001] for i in range(0, len(text), 7001)])
        assert await ws.recv() == text
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, 10)
        await ws.close(code=4001, reason="done")
        assert ws.close_code == 4001, ws.close_code
    print("ok")


CLIENT_OFFERS = [
    ([ClientPerMessageDeflateFactory(client_max_window_bits=True)],
     "permessage-deflate; server_max_window_bits=12; client_max_window_bits=12"),
    ([ClientPerMessageDeflateFactory(server_no_context_takeover=True,
                                     client_no_context_takeover=True)],
     "permessage-deflate; server_no_context_takeover; client_no_context_takeover; "
     "server_max_window_bits=12; client_max_window_bits=12"),
    ([ClientPerMessageDeflateFactory(server_max_window_bits=9,
                                     client_max_window_bits=10)],
     "permessage-deflate; server_max_window_bits=9; client_max_window_bits=10"),
]


async def client_deflate(url):
    for extensions, answer in CLIENT_OFFERS:
        async with websockets.connect(url, max_size=None, compression=None,
                                      extensions=extensions) as ws:
            got = ws.response_headers.get("Sec-WebSocket-Extensions")
            assert got == answer, got
            for msg in ["x", "é" * 50000, bytes(range(256)) * 400]:
                await ws.send(msg)
                assert await ws.recv() == msg
            await ws.close(code=4001)
    print("ok")


SERVER_VARIANTS = {
    "default": None,
    "nct": [ServerPerMessageDeflateFactory(server_no_context_takeover=True,
                                           client_no_context_takeover=True)],
    "bits": [ServerPerMessageDeflateFactory(server_max_window_bits=10,
                                            client_max_window_bits=9)],
}


async def echo(ws):
    try:
        async for msg in ws:
            if msg == "ext?":
                await ws.send(repr(ws.extensions))
                continue
            if msg == "close-me":
                await ws.close(code=4002, reason="bye")
                return
            await ws.send(msg)
    except websockets.ConnectionClosed:
        pass


async def server(variant=None):
    options = {"compression": None}
    if variant:
        options = {"extensions": SERVER_VARIANTS[variant]} if SERVER_VARIANTS[variant] \
            else {"compression": "deflate"}
    async with websockets.serve(echo, "127.0.0.1", 0, max_size=None,
                                **options) as srv:
        port = srv.sockets[0].getsockname()[1]
        print(port, flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)


async def tls_server(port, cert, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    async with websockets.serve(echo, "127.0.0.1", port, ssl=ctx, max_size=None,
                                compression=None):
        print("ready", flush=True)
        await asyncio.Future()


def raw_upgrade(lsock, extra=b""):
    """Accept a connection and answer its handshake (extra: more header
    lines, each ending in CRLF); the socket."""
    conn, _ = lsock.accept()
    conn.settimeout(10)
    head = b""
    while b"\r\n\r\n" not in head:
        head += conn.recv(4096)
    key = [ln.split(b":", 1)[1].strip() for ln in head.split(b"\r\n")
           if ln.lower().startswith(b"sec-websocket-key:")][0]
    accept = base64.b64encode(hashlib.sha1(
        key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                 b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept +
                 b"\r\n" + extra + b"\r\n")
    return conn


def answer(exts):
    lsock = socket.create_server(("127.0.0.1", 0))
    print(lsock.getsockname()[1], flush=True)
    for ext in exts:
        extra = b"" if ext == "-" else b"Sec-WebSocket-Extensions: " + ext.encode() + b"\r\n"
        raw_upgrade(lsock, extra).close()


def masked():
    lsock = socket.create_server(("127.0.0.1", 0))
    print(lsock.getsockname()[1], flush=True)
    conn = raw_upgrade(lsock)
    conn.sendall(b"\x81\x82\x00\x00\x00\x00hi")
    frame = b""
    while len(frame) < 4:
        frame += conn.recv(4096)
    mask, payload = frame[2:6], frame[6:8]
    code = struct.unpack(">H", bytes(b ^ mask[i] for i, b in enumerate(payload)))[0]
    print(code, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "client":
        asyncio.run(asyncio.wait_for(client(sys.argv[2]), 30))
    elif sys.argv[1] == "client-deflate":
        asyncio.run(asyncio.wait_for(client_deflate(sys.argv[2]), 30))
    elif sys.argv[1] == "masked":
        masked()
    elif sys.argv[1] == "tls-server":
        asyncio.run(tls_server(int(sys.argv[2]), sys.argv[3], sys.argv[4]))
    elif sys.argv[1] == "answer":
        answer(sys.argv[2:])
    else:
        asyncio.run(server(sys.argv[2] if len(sys.argv) > 2 else None))
