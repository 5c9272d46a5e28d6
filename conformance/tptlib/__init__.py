"""Helpers for the TPT-RAID conformance suites: start our tgtd, drive tgtadm,
run libiscsi clients.  Everything here talks to real processes."""
