"""CTest driver for one pytest file: exit 77 (CTest SKIP_RETURN_CODE) with a printed reason when
PyTorch or pytest is missing, when pytest collected no test (its exit code 5) or when every test
skipped itself (the first reason is printed); otherwise pytest's own exit code."""
import os
import sys

SKIP = 77

try:
    import pytest
except ImportError as e:
    print(f"SKIP: pytest is not installed ({e}); run tools/test.sh to install it into .venv")
    sys.exit(SKIP)
try:
    import torch  # noqa: F401  (import only: the tests run it on the simulator in subprocesses)
except Exception as e:  # noqa: BLE001  (a CPU-only or broken install is also a reason to skip)
    print(f"SKIP: PyTorch is not importable ({type(e).__name__}: {e}); run tools/test.sh to install it")
    sys.exit(SKIP)
if not torch.version.cuda:
    print(f"SKIP: PyTorch {torch.__version__} is a CPU-only build")
    sys.exit(SKIP)

class Outcomes:
    """Counts what the tests did, so a file whose every test skipped is reported skipped, with why.
    With UVMC_TEST_DURATIONS (a file; tools/test.sh sets it) each test's seconds (setup, call and
    teardown) are appended there as "SECONDS NODEID" lines, for the log's ten slowest."""

    def __init__(self):
        self.ran, self.skipped = 0, []
        self.durations_file = os.environ.get("UVMC_TEST_DURATIONS")
        self.seconds = {}

    def pytest_runtest_logreport(self, report):
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration
        if report.when == "teardown" and self.durations_file:
            with open(self.durations_file, "a") as f:  # one short write per test: safe beside other files' runs
                f.write(f"{self.seconds.pop(report.nodeid):.2f} {report.nodeid}\n")
        if report.skipped and not hasattr(report, "wasxfail"):
            self.skipped.append(str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else "skipped")
        elif report.when == "call":
            self.ran += 1


outcomes = Outcomes()
# Checkpoints of passing tests are deleted once the file's tests end (hundreds of MiB each, kept
# for the last three sessions otherwise, GiBs across the matrix); a failing test's files stay.
rc = pytest.main(["-q", "-rsxP", "-p", "no:cacheprovider", "-o", "tmp_path_retention_policy=failed",
                  *sys.argv[1:]], plugins=[outcomes])
if rc == pytest.ExitCode.NO_TESTS_COLLECTED:
    print("SKIP: pytest collected no tests")
    sys.exit(SKIP)
if rc == pytest.ExitCode.OK and outcomes.skipped and not outcomes.ran:
    print(f"SKIP: {outcomes.skipped[0]}")
    sys.exit(SKIP)
sys.exit(int(rc))
