#!/usr/bin/env python3
"""Outside verifier for warden's audit checkpoints and proofs (docs/audit.md, "The Merkle tree").
Needs no warden and no database: the Python standard library for the Merkle tree (RFC 6962 /
RFC 9162 2.1), and the openssl command for the Ed25519 signature. Trusts nothing in a proof
file but its hashes: the sizes and roots it checks against come from signed checkpoints.

usage:
  verify_proof.py checkpoint  PUBKEY.pem CHECKPOINT
  verify_proof.py inclusion   PUBKEY.pem CHECKPOINT PROOF.json [ENTRY.json]
  verify_proof.py consistency PUBKEY.pem OLD_CHECKPOINT NEW_CHECKPOINT PROOF.json

PROOF.json is what `warden audit prove` or `warden audit consistency` printed; ENTRY.json one
line of `warden audit export` (its hash is recomputed and must be the proved leaf).
Exit 0 with "ok: ..." when everything checks, 1 with "FAIL: ..." otherwise.
"""
import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import verify_export  # noqa: E402  (the entry hash, as the export verifier computes it)

SIGNATURE_PREFIX = "\u2014 "


class Fail(Exception):
    pass


def node(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def raw_public_key(pem):
    # An Ed25519 SubjectPublicKeyInfo is 12 bytes of DER header and the 32-byte key.
    der = base64.b64decode("".join(l for l in pem.splitlines() if l and not l.startswith("-----")))
    if len(der) != 44:
        raise Fail("the public key is not an Ed25519 key")
    return der[12:]


def verify_signature(pubkey_path, body, signature):
    with tempfile.TemporaryDirectory() as tmp:
        body_path, sig_path = os.path.join(tmp, "body"), os.path.join(tmp, "sig")
        with open(body_path, "wb") as f:
            f.write(body)
        with open(sig_path, "wb") as f:
            f.write(signature)
        r = subprocess.run(["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", pubkey_path,
                            "-rawin", "-in", body_path, "-sigfile", sig_path],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return r.returncode == 0


def read_checkpoint(pubkey_path, path):
    """The (origin, size, root) of a checkpoint signed by the key, or Fail."""
    with open(pubkey_path, encoding="ascii") as f:
        raw = raw_public_key(f.read())
    with open(path, "rb") as f:
        note = f.read().decode("utf-8")
    body, sep, signatures = note.partition("\n\n")
    if not sep:
        raise Fail("%s has no signature" % path)
    lines = body.split("\n")
    if len(lines) < 3:
        raise Fail("%s needs origin, size and root lines" % path)
    origin, size, root = lines[0], lines[1], base64.b64decode(lines[2], validate=True)
    if not size.isdigit() or len(root) != 32:
        raise Fail("%s: bad size or root line" % path)
    key_id = hashlib.sha256(origin.encode() + b"\n\x01" + raw).digest()[:4]
    for line in signatures.split("\n"):
        if not line.startswith(SIGNATURE_PREFIX):
            continue
        name, _, blob = line[len(SIGNATURE_PREFIX):].partition(" ")
        blob = base64.b64decode(blob)
        if name != origin or len(blob) != 68 or blob[:4] != key_id:
            continue
        if verify_signature(pubkey_path, (body + "\n").encode("utf-8"), blob[4:]):
            return origin, int(size), root
        raise Fail("%s: the signature does not verify" % path)
    raise Fail("%s carries no signature by this key" % path)


def root_from_inclusion(index, size, leaf, path):
    """RFC 9162 2.1.3.2."""
    if index >= size:
        raise Fail("leaf index %d is not below the tree size %d" % (index, size))
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            raise Fail("the inclusion proof is too long")
        if fn & 1 or fn == sn:
            r = node(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise Fail("the inclusion proof is too short")
    return r


def check_consistency(old_size, new_size, old_root, new_root, proof):
    """RFC 9162 2.1.4.2."""
    if old_size > new_size:
        raise Fail("the old tree is larger than the new one")
    if old_size == new_size:
        if proof or old_root != new_root:
            raise Fail("two checkpoints of one size with different roots: the log was rewritten")
        return
    if old_size == 0:
        return
    if not proof:
        raise Fail("an empty consistency proof")
    if old_size & (old_size - 1) == 0:
        proof = [old_root] + proof
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            raise Fail("the consistency proof is too long")
        if fn & 1 or fn == sn:
            fr, sr = node(c, fr), node(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0 or fr != old_root or sr != new_root:
        raise Fail("the new tree does not extend the old one: the log was rewritten")


def hexes(values):
    return [bytes.fromhex(v) for v in values]


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    what, pubkey = argv[1], argv[2]
    if what == "checkpoint":
        origin, size, root = read_checkpoint(pubkey, argv[3])
        print("ok: %s has %d entries, root %s" % (origin, size, root.hex()))
    elif what == "inclusion" and len(argv) in (5, 6):
        _, size, root = read_checkpoint(pubkey, argv[3])
        with open(argv[4], encoding="utf-8") as f:
            proof = json.load(f)
        if proof["tree_size"] != size:
            raise Fail("the proof is for %d entries, the checkpoint for %d" % (proof["tree_size"], size))
        leaf = bytes.fromhex(proof["leaf_hash"])
        if len(argv) == 6:
            with open(argv[5], encoding="utf-8") as f:
                entry = verify_export.parse(f.readline())
            claimed = entry.pop("hash")
            digest = hashlib.sha256((entry["prev_hash"] + verify_export.canonical(entry)).encode("utf-8")).hexdigest()
            if digest != claimed:
                raise Fail("entry %s does not match its own hash" % entry["id"])
            if int(entry["id"]) != proof["entry"] or hashlib.sha256(b"\x00" + bytes.fromhex(digest)).digest() != leaf:
                raise Fail("the proof is not about entry %s" % entry["id"])
        if root_from_inclusion(proof["leaf_index"], size, leaf, hexes(proof["path"])) != root:
            raise Fail("entry %d is not in the checkpointed tree" % proof["entry"])
        print("ok: entry %d is in the tree of %d entries" % (proof["entry"], size))
    elif what == "consistency" and len(argv) == 6:
        _, old_size, old_root = read_checkpoint(pubkey, argv[3])
        _, new_size, new_root = read_checkpoint(pubkey, argv[4])
        with open(argv[5], encoding="utf-8") as f:
            proof = json.load(f)
        if (proof["old_size"], proof["new_size"]) != (old_size, new_size):
            raise Fail("the proof is for sizes %d and %d, the checkpoints %d and %d"
                       % (proof["old_size"], proof["new_size"], old_size, new_size))
        check_consistency(old_size, new_size, old_root, new_root, hexes(proof["proof"]))
        print("ok: the tree of %d entries extends the tree of %d" % (new_size, old_size))
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (Fail, ValueError, KeyError, OSError) as e:
        print("FAIL: %s" % e)
        sys.exit(1)
