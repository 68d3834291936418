#!/usr/bin/env python3
"""A carrier's booking API, stubbed on loopback for the shipping example (no network).

    python3 examples/shipping/carrier.py [PORT]      (default 0: a free port)

Prints `listening on http://127.0.0.1:PORT` first, then a line per request. POST /shipments
with a JSON shipment and an `Idempotency-Key` header books it: 201 the first time, 200 with the
same booking when that key comes again (a replayed record books the same shipment once). 400
without the header; 422 when the address holds "nowhere"; 503 when it holds "busy".
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

bookings = {}


class Carrier(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        key = self.headers.get("Idempotency-Key")
        if self.path != "/shipments":
            return self.answer(404, {"error": "no such path"})
        if not key:
            return self.answer(400, {"error": "no Idempotency-Key"})
        try:
            shipment = json.loads(body)
        except ValueError:
            return self.answer(400, {"error": "not JSON"})
        address = str(shipment.get("address", ""))
        if "nowhere" in address:
            return self.answer(422, {"error": "no such address"})
        if "busy" in address:
            return self.answer(503, {"error": "try again later"})
        if key in bookings:
            return self.answer(200, {"booking": bookings[key], "again": True})
        bookings[key] = f"BK-{len(bookings) + 1:04d}"
        self.answer(201, {"booking": bookings[key]})

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):
        key = self.headers.get("Idempotency-Key", "-") if self.headers else "-"
        print(f"carrier: {self.command} {self.path} key={key} -> {args[1]}", flush=True)


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Carrier)
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
