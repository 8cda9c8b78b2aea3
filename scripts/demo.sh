#!/usr/bin/env bash
# `make run`: warden's main job on its embedded defaults. Until the gateway lands, that is the
# sandbox: it runs a small untrusted script in `warden run` and shows what it could and could not do.
set -uo pipefail
WARDEN=${1:-build/src/cli/warden}

cat <<'EOT'
== warden run: an untrusted script in a fresh sandbox ==
   warden run --timeout 10s --memory 256M --pids 64 --json - -- python3 untrusted.py
EOT

read -r -d '' SCRIPT <<'PY'
import ctypes, os, socket, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def unshare_user():
    if libc.unshare(0x10000000) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
def attempt(what, fn):
    try:
        fn(); print(f"  {what:<42} ALLOWED")
    except Exception as e:
        print(f"  {what:<42} refused ({type(e).__name__}: {getattr(e, 'strerror', None) or e})")
print(f"  running as uid {os.getuid()} in {os.getcwd()}, {len([p for p in os.listdir('/proc') if p.isdigit()])} processes visible")
attempt("read /etc/shadow", lambda: open("/etc/shadow").read())
attempt("write /usr/bin/evil", lambda: open("/usr/bin/evil", "w"))
attempt("connect to 1.1.1.1:443", lambda: socket.create_connection(("1.1.1.1", 443), timeout=2))
attempt("mount a tmpfs", lambda: subprocess.run(["mount", "-t", "tmpfs", "x", "/tmp"], check=True, capture_output=True))
attempt("unshare a user namespace", unshare_user)
attempt("write /tmp/scratch", lambda: open("/tmp/scratch", "w").write("ok"))
PY

record=$(mktemp)
"$WARDEN" run --timeout 10s --memory 256M --pids 64 --json "$record" -- python3 -c "$SCRIPT"
status=$?
echo "== result record =="
cat "$record"
rm -f "$record"
echo "== exit status $status; 'violations' lists the syscalls the sandbox refused =="
echo "Try it yourself:  $WARDEN run --help"
