"""A minimal Chrome DevTools Protocol client on the standard library alone:
starts headless Chromium with a debugging port, opens one page over a
websocket (RFC 6455, client side: masked text frames out, unmasked frames
in) and sends commands. Console messages and uncaught exceptions are
collected, so a test can fail on any of them.
"""
import base64
import json
import os
import socket
import struct
import subprocess
import time
import urllib.request


class CdpError(Exception):
    pass


class WebSocket:
    def __init__(self, url, timeout):
        assert url.startswith("ws://")
        hostport, path = url[5:].split("/", 1)
        host, port = hostport.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise CdpError("websocket handshake: connection closed")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise CdpError("websocket handshake refused: %r" % head[:200])
        self.buf = head.split(b"\r\n\r\n", 1)[1]

    def send(self, text):
        data = text.encode()
        n = len(data)
        hdr = bytearray([0x81])
        if n < 126:
            hdr.append(0x80 | n)
        elif n < 65536:
            hdr.append(0x80 | 126)
            hdr += struct.pack(">H", n)
        else:
            hdr.append(0x80 | 127)
            hdr += struct.pack(">Q", n)
        mask = os.urandom(4)
        hdr += mask
        self.sock.sendall(bytes(hdr) + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise CdpError("websocket closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            op = b0 & 0x0F
            if op == 8:
                raise CdpError("websocket closed by the browser")
            if op in (9, 10):  # ping/pong: nothing to answer for a short session
                continue
            message += payload
            if b0 & 0x80:
                return message.decode("utf-8", "replace")


class Browser:
    """One headless Chromium with one page."""

    def __init__(self, chromium, profile, width=1280, height=900, timeout=60):
        self.timeout = timeout
        os.makedirs(profile, exist_ok=True)
        port_file = os.path.join(profile, "DevToolsActivePort")
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.proc = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--remote-debugging-port=0", "--user-data-dir=" + profile,
             "--window-size=%d,%d" % (width, height), "--hide-scrollbars", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not os.path.exists(port_file) or os.path.getsize(port_file) == 0:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise CdpError("chromium did not open its debugging port")
            time.sleep(0.05)
        port = open(port_file).read().split()[0]
        pages = json.load(urllib.request.urlopen("http://127.0.0.1:%s/json/list" % port))
        page = [p for p in pages if p.get("type") == "page"][0]
        self.ws = WebSocket(page["webSocketDebuggerUrl"], timeout)
        self.next_id = 0
        self.events = []
        self.console = []  # (level, text) of console messages and exceptions
        self.call("Runtime.enable")
        self.call("Log.enable")
        self.call("Page.enable")
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def _note(self, msg):
        m, p = msg.get("method"), msg.get("params", {})
        if m == "Runtime.consoleAPICalled":
            self.console.append((p.get("type"), " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", []))))
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.console.append(("exception", d.get("text", "") + " " +
                                 str(d.get("exception", {}).get("description", ""))))
        elif m == "Log.entryAdded":
            e = p.get("entry", {})
            self.console.append((e.get("level"), e.get("text", "")))
        self.events.append(msg)

    def call(self, method, params=None):
        self.next_id += 1
        my = self.next_id
        self.ws.send(json.dumps({"id": my, "method": method, "params": params or {}}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my:
                if "error" in msg:
                    raise CdpError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            self._note(msg)

    def wait_event(self, method):
        for i, m in enumerate(self.events):
            if m.get("method") == method:
                del self.events[: i + 1]
                return m
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            self._note(msg)
            if msg.get("method") == method:
                self.events.clear()
                return msg
        raise CdpError("no %s within %d s" % (method, self.timeout))

    def navigate(self, url):
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def eval(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise CdpError("page script failed: %s" % r["exceptionDetails"])
        return r.get("result", {}).get("value")

    def mouse(self, kind, x, y, buttons=0, modifiers=0):
        self.call("Input.dispatchMouseEvent",
                  {"type": kind, "x": x, "y": y, "button": "left" if kind != "mouseMoved" or buttons else "none",
                   "buttons": buttons, "clickCount": 1 if kind != "mouseMoved" else 0,
                   "modifiers": modifiers})

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
