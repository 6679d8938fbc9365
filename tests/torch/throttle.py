"""A TCP proxy in front of the tests' moto server (s3_server.py) that limits EACH connection to
`rate` bytes per second in each direction and delays each chunk it forwards by `delay` seconds:
a model of S3, which serves each connection at about 85-90 MB/s and gets its throughput from
concurrent connections (AWS S3 user guide, "Performance guidelines for Amazon S3"). moto on
loopback has no such limit, so there one connection is as fast as ten. What it does not model:
moto's own speed is the ceiling (one Python process), and neither S3's request latency
distribution nor its throttling (503 SlowDown) is modelled.

    python throttle.py UPSTREAM_PORT [--rate BYTES_PER_S] [--delay SECONDS]  # prints its port
"""
import argparse
import asyncio
import socket
import subprocess
import sys
import time

MIB = 1 << 20
DEFAULT_RATE, DEFAULT_DELAY = 8 * MIB, 0.002


BURST_S = 0.05  # the most an idle connection saves up, in seconds of its rate


async def _pump(reader, writer, rate, delay):
    """Copies `reader` to `writer` at most `rate` bytes/s (a token bucket per direction of one
    connection, holding at most BURST_S seconds of it: a connection kept idle in a client's pool
    gains no credit for its next request), each chunk `delay` seconds late."""
    due = time.monotonic()  # when the bytes forwarded so far have been paid for
    try:
        while True:
            data = await reader.read(64 << 10)
            if not data:
                break
            now = time.monotonic()
            due = max(due, now - BURST_S) + len(data) / rate
            wait = max(due - now, 0) + delay
            await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:  # noqa: BLE001
            pass


async def serve(upstream_port, rate, delay, ready):
    async def handle(cr, cw):
        try:
            ur, uw = await asyncio.open_connection("127.0.0.1", upstream_port)
        except OSError:
            cw.close()
            return
        await asyncio.gather(_pump(cr, uw, rate, delay), _pump(ur, cw, rate, delay))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    ready(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


def start(upstream_url, rate=DEFAULT_RATE, delay=DEFAULT_DELAY):
    """The proxy in its own process in front of `upstream_url` (http://127.0.0.1:PORT): (process,
    its URL). Stop it with proc.terminate()."""
    port = upstream_url.rsplit(":", 1)[1]
    proc = subprocess.Popen([sys.executable, __file__, port, "--rate", str(rate), "--delay", str(delay)],
                            stdout=subprocess.PIPE, text=True)
    mine = int(proc.stdout.readline())
    return proc, f"http://127.0.0.1:{mine}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("upstream_port", type=int)
    p.add_argument("--rate", type=float, default=DEFAULT_RATE, help="bytes per second per connection and direction")
    p.add_argument("--delay", type=float, default=DEFAULT_DELAY, help="seconds added to each forwarded chunk")
    a = p.parse_args()

    def ready(port):
        print(port, flush=True)

    asyncio.run(serve(a.upstream_port, a.rate, a.delay, ready))


if __name__ == "__main__":
    socket.setdefaulttimeout(None)
    main()
