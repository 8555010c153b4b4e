"""test_spindled_https's client, one check per mode; prints what it saw.
  get PORT CA              GET /plaintext over HTTPS (http.client): "plaintext BODY";
                           a message through wss://127.0.0.1:PORT/echo: "wss MESSAGE",
                           and the extensions agreed: "extensions VALUE"
  cn PORT CA               a new handshake verified with CA: "cn=SUBJECT_CN"
  redirect PORT HOST PATH  a plain HTTP GET with that Host header:
                           "status=CODE location=LOCATION"
Exit status 0 unless something failed (the error on stderr)."""
import asyncio
import http.client
import socket
import ssl
import sys


def context(ca):
    return ssl.create_default_context(cafile=ca)


def get(port, ca):
    ctx = context(ca)
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=20)
    c.request("GET", "/plaintext")
    print("plaintext", c.getresponse().read().decode())

    import websockets  # Debian python3-websockets

    async def over_wss():
        async with websockets.connect(f"wss://127.0.0.1:{port}/echo", ssl=ctx) as ws:
            await ws.send("over tls")
            print("wss", await ws.recv())
            print("extensions", ws.response_headers.get("Sec-WebSocket-Extensions"))

    asyncio.run(over_wss())


def cn(port, ca):
    raw = socket.create_connection(("127.0.0.1", port), timeout=20)
    with context(ca).wrap_socket(raw, server_hostname="127.0.0.1") as s:
        subject = dict(x[0] for x in s.getpeercert()["subject"])
        print(f"cn={subject['commonName']}")


def redirect(port, host, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.request("GET", path, headers={"Host": host})
    r = c.getresponse()
    print(f"status={r.status} location={r.getheader('Location')}")


mode, port = sys.argv[1], int(sys.argv[2])
if mode == "get":
    get(port, sys.argv[3])
elif mode == "cn":
    cn(port, sys.argv[3])
else:
    redirect(port, sys.argv[3], sys.argv[4])
