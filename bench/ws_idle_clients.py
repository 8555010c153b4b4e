"""N WebSocket connections for bench/ws_idle.sh: each sends one 1 KB
JSON-like text message and reads its echo, then all stay open and idle.
Prints "open N" once they are, and holds them until stdin closes.

    ws_idle_clients.py URL N deflate|plain
"""
import asyncio
import json
import sys

import websockets


async def one(url, compression, message):
    ws = await websockets.connect(url, compression=compression, max_size=None,
                                  ping_interval=None)
    await ws.send(message)
    assert await ws.recv() == message
    if compression and not ws.extensions:
        raise SystemExit("ws_idle_clients.py: permessage-deflate not agreed")
    return ws


async def main(url, n, mode):
    compression = "deflate" if mode == "deflate" else None
    message = json.dumps([{"id": i, "name": "fiber-%d" % i, "state": "parked"}
                          for i in range(20)])
    conns = []
    for start in range(0, n, 100):
        conns += await asyncio.gather(*(one(url, compression, message)
                                        for _ in range(start, min(n, start + 100))))
    print("open", len(conns), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for ws in conns:
        ws.transport.abort()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
