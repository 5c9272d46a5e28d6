"""The paper's Tables I and II (III-E) as formulas, and the same terms taken
from a controller's TPT-RAID counters, for conformance/test_host_protocol.py
and scripts/bench/tables.

A "block" is the paper's block: one striping unit.  Table I counts the
blocks each entity sends or receives (a transfer between two targets at
both ends); Table II the operations each entity initiates: sending a PDU
or starting an RDMA operation (receiving is free).  The paper's entities
are the host, the controller and the targets (all of them together).

How the counters give the terms (docs/controller.md's counters table):
  blocks  host        host_in+host_out + direct_in+direct_out
          controller  host_in+host_out + target_in+target_out
          targets     target_in+target_out + direct_in+direct_out + 2*peer_bytes
  ops     host        its commands: one per request
          controller  pdus + one response per request + one data transfer
                      per request whose data crossed the controller
          targets     one response per command (pdus) + their one-sided
                      transfers: rma_ops in tpt mode; in baseline mode each
                      member READ or WRITE moves its data once, which iSER
                      (the paper's transport) does with one RDMA operation
Our host-controller hop is iSCSI over TCP, which moves a request's data in
Data-In/Data-Out PDUs of at most MaxRecvDataSegmentLength rather than one
RDMA operation; the paper's iSER count (one) is what is modelled here.
"""

REQUESTS = ("single-block READ", "full-stripe READ", "single-block WRITE",
            "full-stripe WRITE")
ENTITIES = ("host", "controller", "targets")


def _rows(n, **formulas):
    """{entity: {request: value}} from per-entity tuples in REQUESTS order."""
    return {e: dict(zip(REQUESTS, formulas[e])) for e in ENTITIES}


def paper(mode, n):
    """Tables I and II for a mode ('baseline' or 'tpt') and N targets:
    {"blocks": {entity: {request: int}}, "ops": {...}}, with a "total"
    entity each."""
    if mode == "baseline":
        blocks = _rows(n, host=(1, n - 1, 1, n - 1),
                       controller=(2, 2 * (n - 1), 5, 2 * n - 1),
                       targets=(1, n - 1, 4, n))
        ops = _rows(n, host=(1, 1, 1, 1),
                    controller=(3, n + 1, 6, n + 2),
                    targets=(2, 2 * (n - 1), 8, 2 * n))
    elif mode == "tpt":
        blocks = _rows(n, host=(1, n - 1, 1, n - 1),
                       controller=(0, 0, 0, 0),
                       targets=(1, n - 1, 3, 3 * (n - 1)))
        ops = _rows(n, host=(1, 1, 1, 1),
                    controller=(2, n, 6, 3 * n - 1),
                    targets=(2, 2 * (n - 1), 7, 5 * n - 4))
    else:
        raise ValueError(f"no table for mode {mode!r}")
    return {"blocks": _with_total(blocks), "ops": _with_total(ops)}


def expected(client, n):
    """What our array should show for a client kind: 'direct' (an extended
    host on a tpt array: the paper's TPT-RAID), 'baseline' (a stock host on
    a baseline array: the paper's Baseline), or 'proxied' (a stock host on
    a tpt array, which the paper does not have: its TPT-RAID terms plus the
    controller relaying each host block, once from or to the host and once
    to or from the targets, and one data transfer with the host)."""
    if client == "direct":
        return paper("tpt", n)
    if client == "baseline":
        return paper("baseline", n)
    if client != "proxied":
        raise ValueError(f"no expectation for client {client!r}")
    t = paper("tpt", n)
    blocks = {e: dict(t["blocks"][e]) for e in ENTITIES}
    ops = {e: dict(t["ops"][e]) for e in ENTITIES}
    for req in REQUESTS:
        blocks["controller"][req] = 2 * blocks["host"][req]
        ops["controller"][req] += 1
    return {"blocks": _with_total(blocks), "ops": _with_total(ops)}


def _with_total(table):
    table["total"] = {r: sum(table[e][r] for e in ENTITIES) for r in REQUESTS}
    return table


def measured(delta, requests, unit, mode):
    """The Table I and II terms per request from the change `delta` of a
    controller's counters over `requests` equal requests on an array of
    `mode` with striping unit `unit`: {"blocks": {entity: float},
    "ops": {entity: float}}, each with "total"."""
    d = {k: delta.get(k, 0) for k in ("host_in", "host_out", "direct_in", "direct_out",
                                      "target_in", "target_out", "peer_bytes", "pdus",
                                      "rma_ops")}
    host = d["host_in"] + d["host_out"]
    direct = d["direct_in"] + d["direct_out"]
    members = d["target_in"] + d["target_out"]
    blocks = {"host": host + direct, "controller": host + members,
              "targets": members + direct + 2 * d["peer_bytes"]}
    blocks = {e: v / unit / requests for e, v in blocks.items()}
    relayed = 1 if host else 0       # the controller's data transfer with the host
    member_transfers = d["rma_ops"] if mode == "tpt" else d["pdus"]
    ops = {"host": 1.0,
           "controller": d["pdus"] / requests + 1 + relayed,
           "targets": (d["pdus"] + member_transfers) / requests}
    for t in (blocks, ops):
        t["total"] = sum(t[e] for e in ENTITIES)
    return {"blocks": blocks, "ops": ops}
