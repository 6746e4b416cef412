"""A TCP proxy per host in front of a store: it forwards both ways, and the nemesis can cut
the host off (every connection closed, new ones refused: a partition) or stall it (bytes
held, connections kept open: a congested link or a paused NAT) until it heals it."""

import socket
import threading


class Proxy:
    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.state = "pass"  # pass | cut | stall
        self.flowing = threading.Event()
        self.flowing.set()
        self.conns = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.state == "cut":
                    client.close()
                    continue
            try:
                server = socket.create_connection(self.target, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns.append((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                # A stall holds the bytes here until the link heals (or is cut).
                self.flowing.wait()
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        with self.lock:
            self.conns = [c for c in self.conns if src not in c]

    def cut(self):
        with self.lock:
            self.state = "cut"
            conns, self.conns = self.conns, []
        for pair in conns:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.flowing.set()

    def stall(self):
        with self.lock:
            self.state = "stall"
        self.flowing.clear()

    def heal(self):
        with self.lock:
            self.state = "pass"
        self.flowing.set()

    def close(self):
        self.closed = True
        self.cut()
        self.listener.close()
