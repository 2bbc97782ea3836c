#!/usr/bin/env python3
"""Writes the two large HAR files of docs/performance.md's "probe analyze of a large HAR":

  DIR/http.har  250,000 HTTP entries shaped like the fixture's first (Chrome's export: headers,
                a Server-Timing header, a response body's text, every timing), 305 MB;
  DIR/ws.har    one WebSocket entry with 3,000,000 messages, send and receive in turn, 1 ms
                apart (1,500,000 pairs), 322 MB.

Usage: bench/probe/har.py DIR [HTTP_ENTRIES] [WS_MESSAGES]
"""
import sys
from pathlib import Path

HTTP_ENTRY = (
    '{"_connectionId": "2861", "_initiator": {"type": "other"}, "_priority": "VeryHigh", '
    '"_resourceType": "document", "cache": {}, "connection": "443", "pageref": "page_1", '
    '"request": {"method": "GET", "url": "https://example.test/page/%d?q=' + "a" * 40 + '", '
    '"httpVersion": "http/1.1", "headers": [{"name": "Host", "value": "example.test"}], '
    '"queryString": [], "cookies": [], "headersSize": 412, "bodySize": 0}, '
    '"response": {"status": 200, "statusText": "OK", "httpVersion": "http/1.1", "headers": '
    '[{"name": "Content-Type", "value": "text/html; charset=utf-8"}, '
    '{"name": "Server-Timing", "value": "db;dur=12.5"}], "cookies": [], "content": '
    '{"size": 1256, "mimeType": "text/html", "compression": 644, "text": "<!doctype html>\\n'
    '<html><head><title>example, \\"quoted\\"</title></head><body>{\\"not\\": \\"json\\"}'
    '</body></html>"}, "redirectURL": "", "headersSize": 200, "bodySize": 612, '
    '"_transferSize": 812, "_error": null}, "serverIPAddress": "192.0.2.10", '
    '"startedDateTime": "2024-05-01T14:00:00.100+02:00", "time": 105.3, "timings": '
    '{"blocked": 2.1, "dns": 10.0, "ssl": 20.0, "connect": 35.0, "send": 0.2, "wait": 50.0, '
    '"receive": 8.0, "_blocked_queueing": 1.5, "_workerStart": -1, "_workerReady": -1}}'
)

WS_ENTRY_HEAD = (
    '{"_resourceType": "websocket", "cache": {}, "connection": "443", "pageref": "page_1", '
    '"request": {"method": "GET", "url": "wss://example.test/socket", "httpVersion": "HTTP/1.1", '
    '"headers": [{"name": "Upgrade", "value": "websocket"}], "queryString": [], "cookies": [], '
    '"headersSize": 500, "bodySize": 0}, "response": {"status": 101, "statusText": '
    '"Switching Protocols", "httpVersion": "HTTP/1.1", "headers": [], "cookies": [], "content": '
    '{"size": 0, "mimeType": "x-unknown"}, "redirectURL": "", "headersSize": 150, "bodySize": 0, '
    '"_transferSize": 150, "_error": null}, "serverIPAddress": "192.0.2.10", '
    '"startedDateTime": "2024-05-01T12:00:00.300Z", "time": 3000.4, "timings": {"blocked": 0.5, '
    '"dns": -1, "ssl": -1, "connect": -1, "send": 0, "wait": 12.0, "receive": 2988.0}, '
    '"_webSocketMessages": ['
)
MESSAGE = '{"type": "%s", "time": %r, "opcode": 1, "data": "' + "x" * 40 + '"}'
HEAD = '{"log": {"version": "1.2", "creator": {"name":"x","version":"1"}, "entries": ['


def main():
    out = Path(sys.argv[1])
    http_entries = int(sys.argv[2]) if len(sys.argv) > 2 else 250_000
    ws_messages = int(sys.argv[3]) if len(sys.argv) > 3 else 3_000_000
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "http.har", "w") as f:
        f.write(HEAD)
        f.write(",".join(HTTP_ENTRY % k for k in range(http_entries)))
        f.write("]}}")
    with open(out / "ws.har", "w") as f:
        f.write(HEAD + WS_ENTRY_HEAD)
        kinds = ("send", "receive")
        f.write(",".join(MESSAGE % (kinds[k % 2], 1714564800 + k / 1000) for k in range(ws_messages)))
        f.write("]}]}}")


if __name__ == "__main__":
    main()
