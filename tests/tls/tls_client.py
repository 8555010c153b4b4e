#!/usr/bin/env python3
"""A TLS client for the TLS tests: connects to the test's echo server on
127.0.0.1, verifies it against a CA file, echoes a line, asks the server
for what it saw ("?info", answered with one line before it closes) and
prints key=value lines for the test to check:
  version= alpn= cn= echo=ok info=<the server's line>
  with --resume, a second connection with the first one's session:
  reused= info2=
  with --file OFF LEN PATH, after the echo: "?file OFF LEN" instead of
  "?info", and file=<bytes received> match=<they equal PATH's bytes there>
Exit status 0 unless something failed (then the error on stderr)."""
import argparse
import socket
import ssl
import sys


def connect(args, ctx, session=None):
    raw = socket.create_connection(("127.0.0.1", args.port), timeout=30)
    return ctx.wrap_socket(raw, server_hostname=args.sni, session=session)


def ask_info(s):
    s.sendall(b"?info\n")
    got = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            return got.decode().strip()
        got += chunk


def fetch_file(s, off, length, path):
    s.sendall(b"?file %d %d\n" % (off, length))
    got = bytearray()
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    with open(path, "rb") as f:
        f.seek(off)
        want = f.read(length)
    return "%d match=%s" % (len(got), got == want)


def echo(s):
    s.sendall(b"hello\n")
    got = b""
    while len(got) < 6:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
    return "ok" if got == b"hello\n" else repr(got)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--sni", default="a.test")
    p.add_argument("--alpn", default="")
    p.add_argument("--tls", choices=["1.2", "1.3"])
    p.add_argument("--resume", action="store_true")
    p.add_argument("--file", nargs=3, metavar=("OFF", "LEN", "PATH"))
    args = p.parse_args()

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(args.ca)
    if args.tls:
        v = ssl.TLSVersion.TLSv1_2 if args.tls == "1.2" else ssl.TLSVersion.TLSv1_3
        ctx.minimum_version = ctx.maximum_version = v
    if args.alpn:
        ctx.set_alpn_protocols(args.alpn.split(","))

    s = connect(args, ctx)
    cert = s.getpeercert()
    cn = [v for rdn in cert["subject"] for k, v in rdn if k == "commonName"]
    print("version=" + s.version())
    print("alpn=" + str(s.selected_alpn_protocol()))
    print("cn=" + ",".join(cn))
    print("echo=" + echo(s))  # a TLS 1.3 ticket arrives with this read
    if args.file:
        print("file=" + fetch_file(s, int(args.file[0]), int(args.file[1]), args.file[2]))
        return 0
    print("info=" + ask_info(s))
    session = s.session
    s.close()
    if args.resume:
        s2 = connect(args, ctx, session)
        print("reused=" + str(int(s2.session_reused)))
        print("info2=" + ask_info(s2))
        s2.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
