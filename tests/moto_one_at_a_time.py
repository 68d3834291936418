"""moto's server (moto.server, same options) handling one request at a time.

tests/stack runs this instead of `moto_server`. moto's server is threaded and moto's DynamoDB takes
no lock: a TransactWriteItems copies each table it writes and, when a condition fails, puts the
copies back, so a write another request made to one of those tables meanwhile is lost although it
was answered 200. Serializing the requests (the server stays threaded, so connections are still
accepted and kept alive while one is handled) makes every request atomic, as in DynamoDB.
"""

import threading

import moto.server

_one_at_a_time = threading.Lock()
_run_simple = moto.server.run_simple


def _serialized(app):
    def handle(environ, start_response):
        with _one_at_a_time:
            body = app(environ, start_response)
            try:
                return [b"".join(body)]
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()

    return handle


def _run_serialized(host, port, app, **options):
    return _run_simple(host, port, _serialized(app), **options)


moto.server.run_simple = _run_serialized

if __name__ == "__main__":
    moto.server.main()
