"""test_https's Python client: PORT CA SIZE. Prints one line per check:
the whole file through http.client, two pipelined requests in one TLS
write, three requests as three TLS records in one TCP send (the server
reads ahead: the later records sit in OpenSSL, not in the socket), one
WebSocket message over TLS (Python's websockets)."""
import asyncio
import http.client
import socket
import ssl
import sys

port, ca, size = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context(cafile=ca)

c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=20)
c.request("GET", "/big.bin")
body = c.getresponse().read()
print("file", len(body), body == bytes(i % 256 for i in range(size)))

s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20),
                    server_hostname="127.0.0.1")
s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n" * 2)
got = b""
while got.count(b"Hello, World!") < 2:
    more = s.recv(4096)
    if not more:
        break
    got += more
print("pipelined", got.count(b"HTTP/1.1 200"))

raw = socket.create_connection(("127.0.0.1", port), timeout=20)
inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
obj = ctx.wrap_bio(inc, out, server_hostname="127.0.0.1")
while True:
    try:
        obj.do_handshake()
        break
    except ssl.SSLWantReadError:
        raw.sendall(out.read())
        inc.write(raw.recv(65536))
for _ in range(3):
    obj.write(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
raw.sendall(out.read())  # the handshake's end and three records at once
got = b""
while got.count(b"Hello, World!") < 3:
    try:
        got += obj.read(4096)
    except ssl.SSLWantReadError:
        more = raw.recv(65536)
        if not more:
            break
        inc.write(more)
print("records", got.count(b"HTTP/1.1 200"))

import websockets  # Debian python3-websockets


async def over_wss():
    async with websockets.connect(f"wss://127.0.0.1:{port}/ws", ssl=ctx) as ws:
        await ws.send("over tls")
        print("wss", await ws.recv())

asyncio.run(over_wss())
