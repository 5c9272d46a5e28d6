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
          targets     one response per command (pdus) + their data
                      transfers: the one-sided ones (rma_ops) and the pieces
                      the controller moved in its commands' PDUs (pdu_moves:
                      every member READ or WRITE in baseline mode, inline
                      data and plain READs for a stock host in tpt mode),
                      each of which iSER (the paper's transport) moves with
                      one RDMA operation
Our host-controller hop is iSCSI over TCP, which moves a request's data in
Data-In/Data-Out PDUs of at most MaxRecvDataSegmentLength rather than one
RDMA operation; the paper's iSER count (one) is what is modelled here.
"""

REQUESTS = ("single-block READ", "full-stripe READ", "single-block WRITE",
            "full-stripe WRITE")
ENTITIES = ("host", "controller", "targets")

# The paper's formulas as printed (Python syntax, N the number of
# targets), per mode, table and entity, in REQUESTS order.
FORMULAS = {
    "baseline": {
        "blocks": {"host": ("1", "N-1", "1", "N-1"),
                   "controller": ("2", "2*(N-1)", "5", "2*N-1"),
                   "targets": ("1", "N-1", "4", "N"),
                   "total": ("4", "4*(N-1)", "10", "4*N-2")},
        "ops": {"host": ("1", "1", "1", "1"),
                "controller": ("3", "N+1", "6", "N+2"),
                "targets": ("2", "2*(N-1)", "8", "2*N"),
                "total": ("6", "3*N", "15", "3*(N+1)")}},
    "tpt": {
        "blocks": {"host": ("1", "N-1", "1", "N-1"),
                   "controller": ("0", "0", "0", "0"),
                   "targets": ("1", "N-1", "3", "3*(N-1)"),
                   "total": ("2", "2*(N-1)", "4", "4*(N-1)")},
        "ops": {"host": ("1", "1", "1", "1"),
                "controller": ("2", "N", "6", "3*N-1"),
                "targets": ("2", "2*(N-1)", "7", "5*N-4"),
                "total": ("5", "3*N-1", "14", "8*N-4")}},
}


def _proxied():
    """A stock host on a tpt array, which the paper does not have: its
    TPT-RAID terms plus the controller relaying each host block (once
    from or to the host, once to or from the targets) and starting one
    data transfer with the host.  Except a full-stripe WRITE: holding
    every byte of the stripe, the controller computes the parity itself
    and writes each unit with a WRITE (controller/raid5.c,
    plan_full_stripes_held), which is Baseline's full-stripe WRITE."""
    t = FORMULAS["tpt"]
    host_blocks = t["blocks"]["host"]
    relay = tuple(f"{h}" if h == "1" else f"({h})" for h in host_blocks)
    terms = {
        "blocks": {"host": host_blocks,
                   "controller": tuple(f"2*{h}" for h in relay),
                   "targets": t["blocks"]["targets"],
                   "total": tuple(f"{a}+2*{h}" for a, h in zip(t["blocks"]["total"], relay))},
        "ops": {**t["ops"],
                "controller": tuple(f"{c}+1" for c in t["ops"]["controller"]),
                "total": tuple(f"{c}+1" for c in t["ops"]["total"])}}
    full_write = REQUESTS.index("full-stripe WRITE")
    for table, rows in terms.items():
        for entity, formulas in rows.items():
            formulas = list(formulas)
            formulas[full_write] = FORMULAS["baseline"][table][entity][full_write]
            rows[entity] = tuple(formulas)
    return terms


# What each client kind should show: an extended host on a tpt array is
# the paper's TPT-RAID, a stock host on a baseline array its Baseline.
CLIENT_FORMULAS = {"direct": FORMULAS["tpt"], "baseline": FORMULAS["baseline"],
                   "proxied": _proxied()}


def evaluate(formula, n):
    return eval(formula, {"__builtins__": {}}, {"N": n})  # our own constant text


def expected(client, n):
    """The terms client kind 'direct', 'proxied' or 'baseline' should show
    with N = n targets: {"blocks": {entity: {request: int}}, "ops": ...},
    entities including "total"."""
    return {table: {e: {r: evaluate(f, n) for r, f in zip(REQUESTS, formulas)}
                    for e, formulas in rows.items()}
            for table, rows in CLIENT_FORMULAS[client].items()}


def formula(client, table, entity, request):
    """The printed formula of one term."""
    return CLIENT_FORMULAS[client][table][entity][REQUESTS.index(request)]


def measured(delta, requests, unit):
    """The Table I and II terms per request from the change `delta` of a
    controller's counters over `requests` equal requests on an array with
    striping unit `unit`, of either mode: {"blocks": {entity: float},
    "ops": {entity: float}}, each with "total"."""
    d = {k: delta.get(k, 0) for k in ("host_in", "host_out", "direct_in", "direct_out",
                                      "target_in", "target_out", "peer_bytes", "pdus",
                                      "rma_ops", "pdu_moves")}
    host = d["host_in"] + d["host_out"]
    direct = d["direct_in"] + d["direct_out"]
    members = d["target_in"] + d["target_out"]
    blocks = {"host": host + direct, "controller": host + members,
              "targets": members + direct + 2 * d["peer_bytes"]}
    blocks = {e: v / unit / requests for e, v in blocks.items()}
    relayed = 1 if host else 0       # the controller's data transfer with the host
    member_transfers = d["rma_ops"] + d["pdu_moves"]
    ops = {"host": 1.0,
           "controller": d["pdus"] / requests + 1 + relayed,
           "targets": (d["pdus"] + member_transfers) / requests}
    for t in (blocks, ops):
        t["total"] = sum(t[e] for e in ENTITIES)
    return {"blocks": blocks, "ops": ops}
