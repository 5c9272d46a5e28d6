"""Conformance baseline: libiscsi's iscsi-test-cu against a file LUN of our
tgtd must do at least as well as stock tgt 1.0.85 does here (598/615)."""
import pytest

from tptlib import cu

STOCK_TGT_PASSED = 598


@pytest.mark.slow
def test_iscsi_test_cu_on_file_lun(file_lun, report):
    t, url, backing = file_lun
    expected = cu.load_expected("iscsi-test-cu-tgt.txt")
    result = cu.run(url)
    report(f"{result.summary()} (file LUN; stock tgt 1.0.85: {STOCK_TGT_PASSED}/615)")
    fixed = cu.fixed_expectations(result, expected)
    if fixed:
        report("expected iscsi-test-cu failures that passed: " + ", ".join(fixed))
    problems = cu.check_against(result, expected, STOCK_TGT_PASSED)
    assert not problems, "; ".join(problems) + "\n" + cu.failure_details(result.output)
    assert t.alive()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["tpt", "baseline"])
def test_iscsi_test_cu_on_tptraid_lun(tgtd_factory, mode, report):
    """The same suite against a TPT-RAID-5 LUN over five targets: the array
    must look like a disk to an initiator as much as a file LUN does."""
    from tptlib import cluster

    c = cluster.start(tgtd_factory, n=5, mode=mode, unit=64 << 10, member_bytes=64 << 20)
    expected = cu.load_expected("iscsi-test-cu-tgt.txt")
    result = cu.run(c.url)
    report(f"{result.summary()} (TPT-RAID-5 LUN, {mode} mode)")
    fixed = cu.fixed_expectations(result, expected)
    if fixed:
        report(f"expected iscsi-test-cu failures that passed ({mode}): " + ", ".join(fixed))
    problems = cu.check_against(result, expected, STOCK_TGT_PASSED)
    assert not problems, "; ".join(problems) + "\n" + cu.failure_details(result.output)
    assert c.controller.alive()
