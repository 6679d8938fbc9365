"""The S3 server the storage tests share: moto's server mode (moto on PyPI) in its own process on
127.0.0.1, one per test process (a module-scoped fixture), and the clients' presence checks. Used by
test_s3*.py; tools/setup.sh installs moto and the clients into the first PyTorch set and 2.8's."""
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def missing(modules):
    """The modules of `modules` this Python cannot import (run in a child: importing them here
    would bring their threads into the test process)."""
    code = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    out = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True, text=True).stdout
    return out.split()


def need(modules):
    absent = missing(modules)
    if not absent:
        return
    why = f"{' '.join(absent)} not installed in {sys.executable} (tools/setup.sh installs it)"
    # the main PyTorch set must test the clients in CI: a missing one fails there (tools/test.sh
    # sets UVMC_TORCH_PYTHON only for the other sets)
    if os.environ.get("CI") == "true" and not os.environ.get("UVMC_TORCH_PYTHON"):
        pytest.fail(why)
    pytest.skip(why)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(log_path):
    """moto's server started in its own process (not waited for), its request log to `log_path`
    (a pipe nobody reads would fill and stall the server): (process, endpoint URL, log file)."""
    port = free_port()
    log = open(log_path, "wb")
    # moto_main.py: moto.server with whole-object reads kept across a key's GETs (why: there)
    main = os.path.join(os.path.dirname(os.path.abspath(__file__)), "moto_main.py")
    proc = subprocess.Popen([sys.executable, main, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=log, stderr=subprocess.STDOUT)
    return proc, f"http://127.0.0.1:{port}", log


def wait_up(proc, url, log):
    """Waits (up to 60 s) until the server started by start() answers."""
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                with open(log.name, errors="replace") as f:
                    pytest.fail(f"moto's server did not start: {f.read()[-2000:]}")
            time.sleep(0.2)


def stop(proc, log):
    """Stops a server started by start(), killing it if it does not stop when asked."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """moto's S3 server in its own process (it keeps objects in its own memory: the bodies measure
    only themselves); its endpoint URL."""
    need(["moto", "flask"])
    proc, url, log = start(tmp_path_factory.mktemp("moto") / "server.log")
    try:
        wait_up(proc, url, log)
        yield url
    finally:
        stop(proc, log)


def bucket(url, name):
    urllib.request.urlopen(urllib.request.Request(f"{url}/{name}", method="PUT"), timeout=30).close()
    return name
