"""CTest driver for one pytest file: exit 77 (CTest SKIP_RETURN_CODE) with a printed reason when
PyTorch or pytest is missing, when pytest collected no test (its exit code 5) or when every test
skipped itself (the first reason is printed); otherwise pytest's own exit code."""
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
    """Counts what the tests did, so a file whose every test skipped is reported skipped, with why."""

    def __init__(self):
        self.ran, self.skipped = 0, []

    def pytest_runtest_logreport(self, report):
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
