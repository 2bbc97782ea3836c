"""A preforked app for `proctor share`'s end-to-end test: with gunicorn --preload, the master
builds a ~200 MiB object before forking, so every worker starts sharing it copy-on-write.
GET /touch?offset_mib=A&mib=N writes one byte into every page of that slice, in whichever worker
takes the request, and answers that worker's pid; GET /pid answers the pid alone."""

import os
from urllib.parse import parse_qs

MIB = 1024 * 1024
SIZE_MIB = int(os.environ.get("SHARE_APP_MIB", "200"))
# Repetition writes every byte, so all pages are resident and dirty in the master before fork
# (a zero-filled bytearray would be mapped lazily and share nothing).
MODEL = bytearray(b"\x01") * (SIZE_MIB * MIB)
PAGE = os.sysconf("SC_PAGE_SIZE")


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    query = parse_qs(environ.get("QUERY_STRING", ""))
    if path == "/touch":
        offset = int(query.get("offset_mib", ["0"])[0]) * MIB
        length = int(query.get("mib", ["1"])[0]) * MIB
        end = min(offset + length, len(MODEL))
        for at in range(offset, end, PAGE):
            MODEL[at] = (MODEL[at] + 1) & 0xFF
        body = f"{os.getpid()} touched {(end - offset) // MIB} MiB\n".encode()
    elif path == "/pid":
        body = f"{os.getpid()}\n".encode()
    else:
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
