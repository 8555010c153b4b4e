"""test_https's Python client: PORT CA SIZE. Prints one line per check:
the whole file through http.client, two pipelined requests in one TLS
write, one WebSocket message over TLS (Python's websockets)."""
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

import websockets  # Debian python3-websockets


async def over_wss():
    async with websockets.connect(f"wss://127.0.0.1:{port}/ws", ssl=ctx) as ws:
        await ws.send("over tls")
        print("wss", await ws.recv())

asyncio.run(over_wss())
