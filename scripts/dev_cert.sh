#!/bin/sh
# A self-signed certificate for trying spindled's HTTPS on this machine
# (make run): DIR/cert.pem and DIR/key.pem for localhost and 127.0.0.1,
# EC P-256, valid 365 days. Kept when both exist. For local testing only:
# no client trusts it unless told to (curl --cacert DIR/cert.pem).
# Usage: dev_cert.sh DIR
set -eu
dir=$1
[ -s "$dir/cert.pem" ] && [ -s "$dir/key.pem" ] && exit 0
mkdir -p "$dir"
# The key is readable by its owner only, from its first byte.
umask 077
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
  -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
  -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
chmod 644 "$dir/cert.pem"
echo "made a self-signed certificate for local testing: $dir/cert.pem"
