#!/usr/bin/env bash
# HTTPS through the egress proxy with a credential (TLS terminated by the proxy) against the same
# requests through a plain CONNECT tunnel, in one run: N curl requests inside `warden run`, each a
# new process and connection, with a trust bundle of the same size on both sides (the system
# store plus one CA), so that only the proxy's work differs. Prints microseconds per request.
#   bench/https_credential.sh [WARDEN] [N] [ROUNDS]
set -euo pipefail
warden=$(realpath "${1:-build/src/cli/warden}")
n=${2:-100}
rounds=${3:-3}
dir=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$dir"' EXIT
cd "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=ca \
  -addext basicConstraints=critical,CA:TRUE -keyout ca.key -out ca.pem >/dev/null 2>&1
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=allowed.test \
  -keyout leaf.key -out leaf.csr >/dev/null 2>&1
printf 'subjectAltName=DNS:allowed.test\n' > ext
openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile ext \
  -out leaf.pem >/dev/null 2>&1
cat /etc/ssl/certs/ca-certificates.crt ca.pem > bundle.pem
chmod 755 "$dir"; chmod 644 ca.pem bundle.pem
cat > server.py <<'PY'
import socket, ssl, sys, threading
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain("leaf.pem", "leaf.key")
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
open("port", "w").write(str(s.getsockname()[1]))
def serve(c):
    try:
        t = ctx.wrap_socket(c, server_side=True); data = b""
        while b"\r\n\r\n" not in data:
            chunk = t.recv(4096)
            if not chunk: break
            data += chunk
        t.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"); t.close()
    except Exception:
        c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,)).start()
PY
python3 server.py & server=$!
for _ in $(seq 100); do [ -s port ] && break; sleep 0.05; done
port=$(cat port)
loop="s=\$(date +%s%N); for i in \$(seq $n); do curl -s -o /dev/null -H \"Authorization: Bearer \$API_TOKEN\" https://allowed.test:$port/; done; e=\$(date +%s%N); echo \$(( (e-s)/($n*1000) ))"
common=(--allow "allowed.test:$port" --resolve allowed.test=127.0.0.1)
for r in $(seq "$rounds"); do
  t=$(API_TOKEN=SecretValue12345 SSL_CERT_FILE="$dir/ca.pem" "$warden" run "${common[@]}" \
        --egress-credential "API_TOKEN=https://allowed.test:$port" -- sh -c "$loop")
  p=$("$warden" run "${common[@]}" --ro "$dir/bundle.pem:/run/bundle.pem" --env SSL_CERT_FILE=/run/bundle.pem \
        --env API_TOKEN=x -- sh -c "$loop")
  echo "round $r: terminated (credential) $t us/request, tunnel $p us/request, ratio $(awk "BEGIN{printf \"%.2f\", $t/$p}")"
done
