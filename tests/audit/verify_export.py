#!/usr/bin/env python3
"""Reference verifier for `warden audit export --format jsonl` (docs/audit.md, "Verifying an
export elsewhere"). Standard library only. Exit 0 and "ok: N entries, head HASH" when every line
re-hashes and links to the one before; exit 1 naming the first bad entry otherwise.

usage: verify_export.py EXPORT.jsonl [--partial]
  --partial   the export was filtered: check each line's own hash, not the links between lines
"""
import hashlib
import json
import sys


class Number(str):
    """A number exactly as the export wrote it. Reformatting it is not safe: warden prints the
    shortest digits that read back as the same double, but another language's "shortest" may
    pick different digits for a few values."""


def canonical(value):
    """Sorted keys, no whitespace, UTF-8 as is, the escapes of json.dumps, numbers verbatim."""
    if isinstance(value, dict):
        return "{" + ",".join(canonical(k) + ":" + canonical(value[k]) for k in sorted(value)) + "}"
    if isinstance(value, list):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, Number):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def parse(line):
    return json.loads(line, parse_int=Number, parse_float=Number)


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    partial = "--partial" in argv[2:]
    prev, expected_id, count = "0" * 64, 1, 0
    with open(argv[1], encoding="utf-8") as lines:
        for line in lines:
            entry = parse(line)
            claimed = entry.pop("hash")
            body = canonical(entry)
            digest = hashlib.sha256((entry["prev_hash"] + body).encode("utf-8")).hexdigest()
            if digest != claimed:
                print("FAIL at entry %s: does not match its hash: edited" % entry["id"])
                return 1
            if not partial and (int(entry["id"]) != expected_id or entry["prev_hash"] != prev):
                print("FAIL at entry %s: does not link to entry %d" % (entry["id"], expected_id - 1))
                return 1
            prev, expected_id, count = claimed, int(entry["id"]) + 1, count + 1
    print("ok: %d entries, head %s" % (count, prev))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
