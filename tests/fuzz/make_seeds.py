#!/usr/bin/env python3
"""tests/fuzz/make_seeds.py - write the seed corpus of tests/fuzz/api_fuzz.c
into tests/fuzz/corpus/, one file per program below.

The seeds are written from these readable programs rather than kept only
as opaque bytes, so what each one covers is on record; rerun this after
changing the input encoding in api_fuzz.c (decode_size, decode_alignment
and the opcode switch), which this file mirrors.
"""
import os
import struct
import sys

OPS = ["malloc", "calloc", "realloc", "reallocarray", "memalign", "posix_memalign",
       "aligned_alloc", "free", "free_sized", "usable_size", "realloc_zero", "rewrite"]
SMALL_MAX = 256 * 1024
EDGE_SIZES = [0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1024, 4095, 4096, 4097, 65536,
              SMALL_MAX - 1, SMALL_MAX, SMALL_MAX + 1, 1 << 20, (4 << 20) - 4096,
              4 << 20, (4 << 20) + 1, 12 << 20]


def size(n):
    """A size of exactly n bytes (n <= 16 MiB)."""
    if n <= 512:
        return bytes([0]) + struct.pack(">I", n)
    if n in EDGE_SIZES:
        return bytes([5]) + struct.pack(">I", EDGE_SIZES.index(n))
    return bytes([4]) + struct.pack(">I", n)


def impossible(i):
    """The i-th of api_fuzz.c's impossible sizes (SIZE_MAX first)."""
    return bytes([7]) + struct.pack(">I", i)


def align_pow2(shift):
    return bytes([4, shift])


def align_odd(v):
    """v * 3 + 5: rarely a power of two."""
    return bytes([5, v])


def align_small():
    """sizeof(void *) / 2: a power of two posix_memalign must refuse."""
    return bytes([6, 0])


def align_huge():
    return bytes([7, 0])


def op(name, slot, *args):
    return bytes([OPS.index(name), slot]) + b"".join(args)


SEEDS = {
    "small_lifecycle": [
        op("malloc", 0, size(24)), op("malloc", 1, size(100)), op("realloc", 0, size(5000)),
        op("free", 1), op("usable_size", 0), op("rewrite", 0), op("free_sized", 0),
    ],
    "large_realloc_growth": [
        op("malloc", 2, size(300000)), op("realloc", 2, size(1 << 20)), op("realloc", 2, size(4 << 20)),
        op("realloc", 2, size(12 << 20)), op("realloc", 2, size(100)), op("free", 2),
    ],
    "aligned": [
        op("memalign", 3, align_pow2(12), size(100)), op("posix_memalign", 4, align_pow2(6), size(1000)),
        op("aligned_alloc", 5, align_pow2(20), size(5000)), op("aligned_alloc", 6, align_pow2(23), size(10)),
        op("free_sized", 3), op("free_sized", 4), op("free_sized", 5), op("free", 6),
    ],
    "impossible_requests": [
        op("malloc", 7, impossible(0)), op("calloc", 8, size(1 << 20), size(12 << 20), b"\x00"),
        op("reallocarray", 9, size(3), size(100), b"\x00\x07"), op("aligned_alloc", 10, align_odd(2), size(64)),
        op("posix_memalign", 11, align_small(), size(64)), op("memalign", 12, align_huge(), size(64)),
        op("malloc", 7, impossible(4)), op("realloc", 7, impossible(2)),
    ],
    "calloc": [
        op("calloc", 13, size(10), size(100), b"\x01"), op("calloc", 14, size(1), size(2 << 20), b"\x01"),
        op("free", 13), op("free_sized", 14),
    ],
    "realloc_edges": [
        op("realloc", 15, size(100)), op("realloc_zero", 15), op("malloc", 16, size(0)),
        op("realloc", 16, size(SMALL_MAX)), op("realloc", 16, size(SMALL_MAX + 1)), op("free", 16),
    ],
    "every_slot": [op("malloc", i, size(16 << (i % 12))) for i in range(32)]
    + [op("rewrite", i) for i in range(32)] + [op("free", i) for i in range(32)],
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
    os.makedirs(out, exist_ok=True)
    for name, program in SEEDS.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(b"".join(program))


if __name__ == "__main__":
    main()
