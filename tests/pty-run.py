#!/usr/bin/env python3
"""pty-run.py OUT COMMAND [ARGS...]: runs COMMAND with its standard output
on a pseudo-terminal, as a person at a terminal would (standard error stays
the caller's), writes every byte it printed to OUT (the terminal's CRLF
turned back into LF) and exits with its exit status."""
import os
import pty
import subprocess
import sys


def main():
    out, argv = sys.argv[1], sys.argv[2:]
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdout=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        try:
            b = os.read(master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not b:
            break
        chunks.append(b)
    os.close(master)
    rc = p.wait()
    with open(out, "wb") as f:
        f.write(b"".join(chunks).replace(b"\r\n", b"\n"))
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main())
