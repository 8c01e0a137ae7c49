"""An independent reader and writer of numval's failure artifact container
(docs/ARTIFACTS.md, format NVARTF01: a zstd frame holding the magic, the
manifest JSON and the tensor records), through the zstd CLI rather than
numval's own code, and the failure signature id (SHA-256 of the canonical JSON
of every key but "id"). Shared by the reproduction tests."""
import hashlib
import json
import os
import struct
import subprocess

MAGIC = b"NVARTF01"


def unzstd(blob=None, path=None, timeout=120):
    """The decompressed bytes of a container given as bytes or as a file."""
    args = ["zstd", "-dc"] + ([path] if path else [])
    return subprocess.run(args, input=blob, capture_output=True, check=True,
                          timeout=timeout).stdout


def parse(raw):
    """(manifest, records) of decompressed bytes; a record is (name, dtype id,
    shape, data bytes, the record's own bytes). Raises ValueError on a wrong magic."""
    if raw[:8] != MAGIC:
        raise ValueError("artifact magic %r is not %r" % (raw[:8], MAGIC))
    (mlen,) = struct.unpack_from("<I", raw, 8)
    man = json.loads(raw[12:12 + mlen])
    off = 12 + mlen
    (n,) = struct.unpack_from("<I", raw, off)
    off += 4
    records = []
    for _ in range(n):
        start = off
        (nl,) = struct.unpack_from("<H", raw, off)
        name = raw[off + 2:off + 2 + nl].decode()
        off += 2 + nl
        dt, nd = struct.unpack_from("<ii", raw, off)
        off += 8
        shape = list(struct.unpack_from("<%dq" % nd, raw, off))
        off += 8 * nd
        (nb,) = struct.unpack_from("<Q", raw, off)
        off += 8
        records.append((name, dt, shape, raw[off:off + nb], raw[start:off + nb]))
        off += nb
    return man, records


def decode(blob=None, path=None):
    """(manifest, {name: (dtype id, shape, data bytes)}) of a container."""
    man, records = parse(unzstd(blob=blob, path=path))
    return man, {r[0]: (r[1], r[2], r[3]) for r in records}


def encode(man, tensors, path, tmp):
    """Write a container (zstd frame with content size and checksum) of a
    manifest and {name: (dtype id, shape, data bytes)}."""
    mj = json.dumps(man).encode()
    raw = MAGIC + struct.pack("<I", len(mj)) + mj + struct.pack("<I", len(tensors))
    for name, (dt, shape, data) in tensors.items():
        nb = name.encode()
        raw += struct.pack("<H", len(nb)) + nb + struct.pack("<ii", dt, len(shape))
        raw += struct.pack("<%dq" % len(shape), *shape) + struct.pack("<Q", len(data)) + data
    rawp = os.path.join(tmp, "raw.bin")
    with open(rawp, "wb") as f:
        f.write(raw)
    subprocess.run(["zstd", "-q", "-f", "--check", rawp, "-o", path], check=True, timeout=60)


def signature_id(sig):
    """SHA-256 of the canonical JSON (sorted keys, compact) of all keys but id."""
    body = {k: v for k, v in sig.items() if k != "id"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()
