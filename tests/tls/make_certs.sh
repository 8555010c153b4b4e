#!/bin/sh
# Certificates for the TLS tests, into DIR: two CAs (ca1, ca2), leaf
# certificates signed by ca1 for a.test and b.test, one signed by ca2 for
# a.test (a.ca2: untrusted by ca1, the "new" certificate of the reload
# test). EC P-256 keys, valid for two days.
# Usage: make_certs.sh OPENSSL DIR
set -eu
openssl=$1
cd "$2"
ec="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
for ca in ca1 ca2; do
  "$openssl" req -x509 $ec -days 2 -subj "/CN=spindle test $ca" \
    -keyout $ca.key -out $ca.pem 2>/dev/null
done
leaf() { # NAME CA OUT
  cat >"$3.ext" <<END
basicConstraints=CA:FALSE
keyUsage=digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:$1,IP:127.0.0.1
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
END
  "$openssl" req $ec -subj "/CN=$1" -keyout "$3.key" -out "$3.csr" 2>/dev/null
  "$openssl" x509 -req -days 2 -in "$3.csr" -CA "$2.pem" -CAkey "$2.key" \
    -CAcreateserial -extfile "$3.ext" -out "$3.pem" 2>/dev/null
}
leaf a.test ca1 a
leaf b.test ca1 b
leaf a.test ca2 a.ca2
