#!/usr/bin/env python3
"""png-check.py PNG [MIN_WIDTH MIN_HEIGHT MIN_INK]: decodes a PNG (as
rsvg-convert writes it: 8-bit RGB or RGBA, not interlaced) with zlib and
struct only, and fails unless it is at least MIN_WIDTH x MIN_HEIGHT with at
least MIN_INK per cent of its pixels not white: an empty or blank picture,
or a file that is not a PNG, fails.  Prints "WIDTH HEIGHT INK_PERCENT"."""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, hdr = 8, [], None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        if zlib.crc32(kind + body) != struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]:
            raise ValueError("bad CRC in chunk %r" % kind)
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    if hdr is None or not idat:
        raise ValueError("no IHDR or IDAT")
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError("unexpected PNG kind: depth %d, colour type %d" % (depth, ctype))
    bpp = 4 if ctype == 6 else 3
    raw = zlib.decompress(b"".join(idat))
    stride = w * bpp
    if len(raw) != h * (stride + 1):
        raise ValueError("truncated image data")
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            elif f != 0:
                raise ValueError("bad filter %d" % f)
        rows.append(line)
        prev = line
    return w, h, bpp, rows


def main():
    path = sys.argv[1]
    min_w = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    min_h = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    min_ink = float(sys.argv[4]) if len(sys.argv) > 4 else 1.0
    try:
        w, h, bpp, rows = decode(path)
    except (ValueError, zlib.error, struct.error, OSError) as e:
        print("%s: %s" % (path, e))
        return 1
    ink = 0
    for line in rows:
        for x in range(w):
            px = line[x * bpp:x * bpp + bpp]
            opaque = bpp == 3 or px[3] > 16
            if opaque and min(px[0], px[1], px[2]) < 235:
                ink += 1
    pct = 100.0 * ink / (w * h)
    print("%d %d %.2f" % (w, h, pct))
    if w < min_w or h < min_h:
        print("%s: %dx%d, smaller than %dx%d" % (path, w, h, min_w, min_h))
        return 1
    if pct < min_ink:
        print("%s: %.2f%% of the pixels drawn, fewer than %.2f%%: blank" % (path, pct, min_ink))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
