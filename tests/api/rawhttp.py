"""rawhttp.py - raw-socket HTTP for the framing and connection tests:
bytes exactly as given (curl would fix or refuse them), the answer's
status, its bytes, whether the server closed the connection after it, and
how long it took; and waiting until rematd has accepted every connection
made to it."""
import socket
import time


def exchange(port, data, timeout=5.0, src=None):
    s = socket.socket()
    if src:
        s.bind((src, 0))
    s.settimeout(timeout)
    s.connect(("127.0.0.1", port))
    t0 = time.time()
    s.sendall(data)
    buf = b""
    closed = False
    try:
        while True:
            c = s.recv(65536)
            if not c:
                closed = True
                break
            buf += c
            head, sep, body = buf.partition(b"\r\n\r\n")
            if not sep:
                continue
            lens = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
            if lens and len(body) >= int(lens[0].split(b":")[1]):
                # The whole answer is in: does the server close now?
                s.settimeout(1.0)
                try:
                    closed = s.recv(1) == b""
                except socket.timeout:
                    closed = False
                break
    except (socket.timeout, ConnectionResetError):
        closed = True
    s.close()
    status = int(buf.split(b" ")[1]) if buf.startswith(b"HTTP/") else 0
    return status, buf, closed, time.time() - t0


def wait_accepted(port, timeout=60.0):
    """Waits until the listening socket on port has no connection left in
    its accept queue (rx_queue in /proc/net/tcp), that is until rematd has
    accepted every connection made so far: on a loaded machine a fixed
    sleep would not be enough.  True when it has, False at the timeout."""
    hexport = ":%04X" % port
    deadline = time.time() + timeout
    while True:
        queued = 0
        with open("/proc/net/tcp") as f:
            for line in f.readlines()[1:]:
                col = line.split()
                if col[1].endswith(hexport) and col[3] == "0A":
                    queued += int(col[4].split(":")[1], 16)
        if queued == 0:
            return True
        if time.time() >= deadline:
            return False
        time.sleep(0.01)
