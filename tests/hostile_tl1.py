"""A TL1 responder that attacks its client: the switch side of the hostile-switch tests.

It logs a client in like a switch would, then misbehaves in one of these modes:
  size-overflow  RTRV-EQPT answers SIZE=4294967295x1 (a 32-bit port count plus one wraps)
  size-huge      RTRV-EQPT answers SIZE=4000000000x4000000000 (tables of 16 GB)
  flood          every command after login gets data lines that never end
  wrong-ctag     every command after login is answered, endlessly, under other ctags
Prints `listening port=N` once it accepts connections, and serves until killed.
"""

import socket
import sys
import threading
import time

HEADER = "\r\n   HOSTILE 26-11-27 00:00:00\r\n"


def reply(ctag: str, data: list[str]) -> bytes:
    body = "".join(f'   "{d}"\r\n' for d in data)
    return (HEADER + f"M  {ctag} COMPLD\r\n" + body + ";\r\n").encode()


def commands(conn: socket.socket):
    """Yields (verb, ctag) for every command the client sends."""
    pending = b""
    while True:
        chunk = conn.recv(4096)
        if not chunk:
            return
        pending += chunk
        while b";" in pending:
            text, pending = pending.split(b";", 1)
            fields = text.decode(errors="replace").strip().split(":")
            if len(fields) >= 4:
                yield fields[0].upper(), fields[3]


def endless(conn: socket.socket, make_line) -> None:
    """Sends lines until the client goes away; a hostile switch never stops."""
    n = 0
    try:
        while True:
            conn.sendall(make_line(n))
            n += 1
    except OSError:
        pass


def serve(conn: socket.socket, mode: str) -> None:
    with conn:
        try:
            for verb, ctag in commands(conn):
                if verb == "ACT-USER":
                    conn.sendall(reply(ctag, []))
                elif mode.startswith("size") and verb == "RTRV-EQPT":
                    size = "4294967295x1" if mode == "size-overflow" else "4000000000x4000000000"
                    conn.sendall(reply(ctag, [f"SYSTEM:SIZE={size}"]))
                elif mode.startswith("size"):
                    conn.sendall(reply(ctag, []))
                elif mode == "flood":
                    conn.sendall((HEADER + f"M  {ctag} COMPLD\r\n").encode())
                    endless(conn, lambda n: f'   "{n},{n + 1}"\r\n'.encode())
                    return
                else:  # wrong-ctag
                    endless(conn, lambda n: reply(f"X{n % 100000}", ["1,2"]))
                    return
        except OSError:
            pass


def main() -> None:
    mode = sys.argv[1]
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    print(f"listening port={listener.getsockname()[1]}", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn, mode), daemon=True).start()
        time.sleep(0)


if __name__ == "__main__":
    main()
