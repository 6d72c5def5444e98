#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# A throwaway CA, a server certificate for localhost/127.0.0.1, a client certificate
# (mutual TLS), and a second unrelated CA (for the "wrong CA" test), in DIR.
set -eu
DIR=${1:?usage: mkcerts.sh DIR}
mkdir -p "$DIR"
cd "$DIR"
[ -f server.pem ] && [ -f ca.pem ] && [ -f client.pem ] && [ -f other-ca.pem ] && exit 0
q() { "$@" >/dev/null 2>&1; }
q openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=nodeagent test CA" -keyout ca.key -out ca.pem
q openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=unrelated CA" -keyout other-ca.key -out other-ca.pem
cat > server.ext <<'EXT'
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1
extendedKeyUsage=serverAuth
EXT
q openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr
q openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 -extfile server.ext -out server.pem
printf 'extendedKeyUsage=clientAuth\n' > client.ext
q openssl req -newkey rsa:2048 -nodes -subj "/CN=nodeagent client" -keyout client.key -out client.csr
q openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 -extfile client.ext -out client.pem
# The pin of the server's public key, as libcurl's CURLOPT_PINNEDPUBLICKEY wants it.
printf 'sha256//%s\n' "$(openssl x509 -in server.pem -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | openssl base64 -A)" > server.pin
printf 'sha256//%s\n' "$(openssl x509 -in other-ca.pem -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | openssl base64 -A)" > wrong.pin
chmod 600 *.key
rm -f *.csr *.ext *.srl
