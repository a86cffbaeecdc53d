#!/usr/bin/env python3
"""Records what real LDAP clients send, as a seed corpus for fuzz/.

A relay listens on LISTEN_PORT, forwards to a running server on
SERVER_PORT, and writes every byte each client connection sent into
OUT_DIR/<prefix>-<n>.ber (a stream of pipelined PDUs, which is what the
fuzz target decodes).

    capture-corpus.py LISTEN_PORT SERVER_PORT OUT_DIR PREFIX
"""

import os
import socket
import sys
import threading


def pump(src, dst, record=None):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if record is not None:
                record.extend(data)
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def main():
    listen_port, server_port, out_dir, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    os.makedirs(out_dir, exist_ok=True)
    listener = socket.create_server(("127.0.0.1", listen_port))
    count = 0
    while True:
        client, _ = listener.accept()
        server = socket.create_connection(("127.0.0.1", server_port))
        count += 1
        record = bytearray()
        path = os.path.join(out_dir, f"{prefix}-{count}.ber")

        def run(client=client, server=server, record=record, path=path):
            back = threading.Thread(target=pump, args=(server, client))
            back.start()
            pump(client, server, record)
            back.join()
            with open(path, "wb") as f:
                f.write(record)
            client.close()
            server.close()

        threading.Thread(target=run, daemon=True).start()


if __name__ == "__main__":
    main()
