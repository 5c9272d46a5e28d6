"""Run libiscsi's iscsi-test-cu and read its CUnit XML report."""
import re
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

EXPECTED_DIR = Path(__file__).resolve().parents[1] / "expected"


@dataclass
class CuResult:
    total: int
    passed: int
    failed: int
    failed_names: set = field(default_factory=set)   # "Suite.Test"
    output: str = ""

    def summary(self) -> str:
        return f"iscsi-test-cu: {self.passed}/{self.total} passed, {self.failed} failed"


def load_expected(name: str) -> dict:
    """An expected-failure list: one 'Suite.Test  reason' per line, '#'
    comments.  Every entry must carry a reason."""
    expected = {}
    for n, line in enumerate((EXPECTED_DIR / name).read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split(None, 1)
        if len(parts) != 2:
            raise ValueError(f"{name}:{n}: '{parts[0]}' has no reason")
        expected[parts[0]] = parts[1]
    return expected


def _summary_counts(root) -> tuple:
    for rec in root.iter("CUNIT_RUN_SUMMARY_RECORD"):
        if rec.findtext("TYPE", "").strip() == "Test Cases":
            return tuple(int(rec.findtext(k).strip()) for k in ("TOTAL", "SUCCEEDED", "FAILED"))
    raise ValueError("no 'Test Cases' summary in the CUnit report")


def parse_report(path: Path) -> CuResult:
    root = ET.parse(path).getroot()
    total, passed, failed = _summary_counts(root)
    names = set()
    for suite in root.iter("CUNIT_RUN_SUITE"):
        suite_name = suite.findtext(".//SUITE_NAME", "").strip()
        for rec in suite.iter("CUNIT_RUN_TEST_FAILURE"):
            names.add(f"{suite_name}.{rec.findtext('TEST_NAME', '').strip()}")
    return CuResult(total, passed, failed, names)


def run(url: str, timeout: float = 900, extra_args=()) -> CuResult:
    """The whole suite, destructive tests included (-d), against url."""
    with tempfile.TemporaryDirectory(prefix="tpt-cu-") as d:
        r = subprocess.run(["iscsi-test-cu", "-d", "-x", *extra_args, url], cwd=d,
                           capture_output=True, text=True, timeout=timeout)
        report = Path(d) / "CUnitAutomated-Results.xml"
        if not report.exists():
            raise RuntimeError(f"iscsi-test-cu wrote no report (exit {r.returncode}):\n"
                               f"{r.stdout[-4000:]}{r.stderr[-4000:]}")
        result = parse_report(report)
    result.output = r.stdout + r.stderr
    return result


def check_against(result: CuResult, expected: dict, minimum_passed: int) -> list:
    """Problems with a run, as sentences; empty when it is acceptable."""
    problems = []
    unexpected = sorted(result.failed_names - expected.keys())
    if unexpected:
        problems.append("unexpected failures: " + ", ".join(unexpected))
    if result.passed < minimum_passed:
        problems.append(f"only {result.passed} passed, need at least {minimum_passed}")
    if result.total == 0:
        problems.append("no test ran")
    return problems


def fixed_expectations(result: CuResult, expected: dict) -> list:
    """Expected failures that passed this time: worth taking off the list."""
    return sorted(expected.keys() - result.failed_names)


def failure_details(output: str, limit: int = 40) -> str:
    lines = [l for l in output.splitlines() if re.search(r"\[FAILED\]", l)]
    return "\n".join(lines[:limit])
