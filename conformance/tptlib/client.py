"""tpt-client as a co-process: an iSCSI initiator and datamover peer that
tests drive with raw CDBs (see tools/tpt-client.c for the line protocol).

    with TptClient() as c:
        c.login("t0", url)
        r = c.command("t0", bytes.fromhex("9e10" + "00" * 12 + "2000"), inlen=32)
        assert r["status"] == 0

Every read from the co-process has a deadline: when it passes, or the
process dies, the process is killed and TptClientError says so, with the
tail of its stderr (which is kept in a file for failure reports)."""
import itertools
import json
import os
import select
import subprocess
import tempfile
import time
from pathlib import Path

from . import paths

# Fields that are u64 on the wire and travel as decimal strings.
_U64_FIELDS = {"array_id", "stag", "rma_addr", "rma_base", "scope"}
_STATS_FIELDS = {"puts", "gets", "rma_ops", "bytes_put", "bytes_got", "refused_peers",
                 "pool_exhausted", "accepted_peers", "refused_by_allow_list", "peers_down"}

# SCSI status bytes and TMF response codes, for readable assertions.
GOOD, CHECK_CONDITION, BUSY, RESERVATION_CONFLICT, TASK_ABORTED = 0x00, 0x02, 0x08, 0x18, 0x40
TMF_FUNCTION_COMPLETE, TMF_TASK_DOES_NOT_EXIST = 0, 1


class TptClientError(RuntimeError):
    """The co-process misbehaved: died, hung or wrote something unreadable."""


class RequestFailed(RuntimeError):
    """The co-process answered ok=false; .response has the whole answer."""

    def __init__(self, op, response):
        self.op = op
        self.response = response
        self.errno_name = response.get("errno_name")
        super().__init__(f"{op}: {response.get('error', response)}")


def _decode_result(r: dict) -> dict:
    for key in ("data", "sense"):
        if key in r:
            r[key] = bytes.fromhex(r[key])
    return r


def sense_key(sense: bytes) -> int:
    """Sense key of fixed (0x70/0x71) or descriptor (0x72/0x73) sense."""
    if len(sense) > 2 and sense[0] & 0x7F in (0x70, 0x71):
        return sense[2] & 0x0F
    if len(sense) > 1 and sense[0] & 0x7F in (0x72, 0x73):
        return sense[1] & 0x0F
    raise ValueError(f"not sense data: {sense.hex()}")


def asc_ascq(sense: bytes) -> tuple:
    if len(sense) > 13 and sense[0] & 0x7F in (0x70, 0x71):
        return sense[12], sense[13]
    if len(sense) > 3 and sense[0] & 0x7F in (0x72, 0x73):
        return sense[2], sense[3]
    raise ValueError(f"not sense data: {sense.hex()}")


class TptClient:
    """One tpt-client process.  Methods mirror the protocol's ops; they
    raise RequestFailed on ok=false unless called with check=False."""

    def __init__(self, timeout: float = 30.0, stderr_path=None, args=(), env=None):
        self.timeout = timeout
        self.binary = paths.tool("tpt-client")
        if stderr_path is None:
            fd, stderr_path = tempfile.mkstemp(prefix="tpt-client-", suffix=".stderr")
            os.close(fd)
        self.stderr_path = Path(stderr_path)
        self._args = list(args)
        self._env = env
        self._ids = itertools.count(1)
        self._buf = bytearray()
        self.proc = None

    # -- life cycle -------------------------------------------------------
    def start(self):
        if not self.binary.exists():
            raise TptClientError(f"{self.binary} is not built (make tools)")
        self._errf = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen([str(self.binary), *self._args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._errf,
                                     env=self._env, start_new_session=True)
        os.set_blocking(self.proc.stdin.fileno(), False)
        return self

    def close(self, timeout: float = 5.0):
        """quit, then wait; kill if it does not go."""
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None:
                try:
                    self.request("quit", timeout=timeout)
                except (TptClientError, RequestFailed, OSError):
                    pass
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.kill()
        finally:
            self._cleanup()

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def _cleanup(self):
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self._errf.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def problems(self) -> str:
        """After close(): why this run was not clean (a non-zero exit, a
        sanitizer report), or ""."""
        rc = self.proc.returncode if self.proc else None
        text = self.stderr_text(1 << 20)
        markers = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")
        if rc == 0 and not any(m in text for m in markers):
            return ""
        return f"tpt-client exited {rc}; stderr:\n{text[-6000:]}"

    def stderr_text(self, tail: int = 8000) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-tail:]
        except FileNotFoundError:
            return ""

    def _die(self, why: str):
        self.kill()
        rc = self.proc.returncode if self.proc else None
        raise TptClientError(f"tpt-client {why} (exit {rc}); stderr:\n{self.stderr_text()}")

    # -- lines --------------------------------------------------------------
    def _write(self, data: bytes, deadline: float):
        fd = self.proc.stdin.fileno()
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                self._die("did not read its stdin in time")
            _, w, _ = select.select([], [fd], [], left)
            if not w:
                continue
            try:
                n = os.write(fd, view)
            except BlockingIOError:
                continue
            except BrokenPipeError:
                self._die("closed its stdin")
            view = view[n:]

    def _read_line(self, deadline: float) -> dict:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self._die("gave no response in time")
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                self._die("exited")
            self._buf += chunk
        line, _, rest = bytes(self._buf).partition(b"\n")
        self._buf = bytearray(rest)
        try:
            return json.loads(line)
        except ValueError:
            self._die(f"wrote a line that is not JSON: {line[:200]!r}")

    def raw(self, line, timeout: float = None) -> dict:
        """Send one line as is (bytes or str, newline added) and return the
        one response: for tests of malformed input."""
        if isinstance(line, str):
            line = line.encode()
        deadline = time.monotonic() + (timeout or self.timeout)
        self._write(line + b"\n", deadline)
        return self._read_line(deadline)

    def _send_request(self, op: str, fields: dict, deadline: float) -> int:
        rid = next(self._ids)
        req = {"op": op, "id": rid}
        for k, v in fields.items():
            if v is None:
                continue
            if isinstance(v, (bytes, bytearray)):
                v = bytes(v).hex()
            elif k in _U64_FIELDS and isinstance(v, int):
                v = str(v)
            req[k] = v
        self._write(json.dumps(req).encode() + b"\n", deadline)
        return rid

    def _expect(self, rid: int, deadline: float) -> dict:
        r = self._read_line(deadline)
        if r.get("id") != rid:
            self._die(f"answered id {r.get('id')} to request {rid}: {r}")
        return r

    def request(self, op: str, timeout: float = None, check: bool = True, **fields) -> dict:
        """One request, one response.  timeout (seconds) bounds the wait
        for the response; requests with their own timeout_ms get that plus
        a margin."""
        budget = timeout or self.timeout
        if "timeout_ms" in fields and fields["timeout_ms"] is not None:
            budget = max(budget, fields["timeout_ms"] / 1000 + 10)
        deadline = time.monotonic() + budget
        rid = self._send_request(op, fields, deadline)
        r = self._expect(rid, deadline)
        if check and not r.get("ok"):
            raise RequestFailed(op, r)
        return r

    # -- iSCSI --------------------------------------------------------------
    def login(self, name: str, url: str, initiator: str = None, timeout_ms: int = None,
              check: bool = True) -> dict:
        return self.request("login", name=name, url=url, initiator=initiator,
                            timeout_ms=timeout_ms, check=check)

    def logout(self, name: str, timeout_ms: int = None, check: bool = True) -> dict:
        return self.request("logout", name=name, timeout_ms=timeout_ms, check=check)

    def drop(self, name: str, reset: bool = True, check: bool = True) -> dict:
        return self.request("drop", name=name, reset=reset, check=check)

    def send(self, name: str, tag: str, cdb: bytes, dir: str = "none", data: bytes = None,
             inlen: int = None, lun: int = None, check: bool = True) -> dict:
        if dir == "out" and data is None:
            data = b""
        return self.request("send", name=name, tag=tag, cdb=bytes(cdb), dir=dir,
                            data=data, inlen=inlen, lun=lun, check=check)

    def wait(self, tags, timeout_ms: int = 10000) -> list:
        """Results in the order of tags: dicts with ok and either status,
        sense (bytes), data (bytes), residual, residual_kind, or error."""
        tags = [tags] if isinstance(tags, str) else list(tags)
        deadline = time.monotonic() + timeout_ms / 1000 + 10
        rid = self._send_request("wait", {"tags": tags, "timeout_ms": timeout_ms}, deadline)
        results = []
        while True:
            r = self._expect(rid, deadline)
            if r.get("done"):
                break
            if "tag" not in r:
                self._die(f"wait answered without a tag: {r}")
            results.append(_decode_result(r))
        if [r["tag"] for r in results] != tags:
            self._die(f"wait answered tags {[r['tag'] for r in results]} for {tags}")
        return results

    def command(self, name: str, cdb: bytes, dir: str = None, data: bytes = None,
                inlen: int = None, lun: int = None, tag: str = None,
                timeout_ms: int = 10000) -> dict:
        """send + wait for one command; dir defaults from data/inlen."""
        if dir is None:
            dir = "out" if data is not None else "in" if inlen is not None else "none"
        tag = tag or f"cmd{next(self._ids)}"
        self.send(name, tag, cdb, dir=dir, data=data, inlen=inlen, lun=lun)
        (r,) = self.wait([tag], timeout_ms=timeout_ms)
        return r

    def clear_unit_attentions(self, name: str, tries: int = 10) -> list:
        """TEST UNIT READY until GOOD.  A fresh login sees the target's
        unit attentions (the client does not eat them the way libiscsi's
        full connect does); returns the (ASC, ASCQ) of those consumed."""
        seen = []
        for _ in range(tries):
            r = self.command(name, bytes(6))
            if not r["ok"]:
                raise RequestFailed("TEST UNIT READY", r)
            if r["status"] == GOOD:
                return seen
            if r["status"] != CHECK_CONDITION or sense_key(r["sense"]) != 0x6:
                raise RequestFailed("TEST UNIT READY", r)
            seen.append(asc_ascq(r["sense"]))
        raise RequestFailed("TEST UNIT READY", {"error": f"still unit attentions: {seen}"})

    def abort(self, name: str, tag: str, timeout_ms: int = None, check: bool = True) -> dict:
        return self.request("abort", name=name, tag=tag, timeout_ms=timeout_ms, check=check)

    # -- datamover ----------------------------------------------------------
    def dm_open(self, role: str, listen: str = "127.0.0.1", port: int = 0, peer_id: int = None,
                array_id: int = None, provider: str = None, pool_bytes: int = None) -> dict:
        return self.request("dm_open", role=role, listen=listen, port=port, peer_id=peer_id,
                            array_id=array_id, provider=provider, pool_bytes=pool_bytes)

    # scope: the datamover scope (iser/tpt_dm.h) a peer is admitted into, or
    # a link or buffer lives in; None is the default scope.  A transfer
    # needs its link and its buffer in the same scope.
    def dm_allow(self, peer_id: int, token: bytes, array_id: int = None, role: str = None,
                 scope: int = None) -> dict:
        return self.request("dm_allow", peer_id=peer_id, token=bytes(token),
                            array_id=array_id, role=role, scope=scope)

    def dm_connect(self, name: str, addr: str, port: int, token: bytes, role: str = None,
                   peer_id: int = None, array_id: int = None, timeout_ms: int = None,
                   counter: int = None, scope: int = None, check: bool = True) -> dict:
        """counter: send the hello with this counter (a replay) instead of a fresh one."""
        return self.request("dm_connect", name=name, addr=addr, port=port, role=role,
                            peer_id=peer_id, array_id=array_id, token=bytes(token),
                            counter=counter, scope=scope, timeout_ms=timeout_ms, check=check)

    def dm_disconnect(self, name: str) -> dict:
        return self.request("dm_disconnect", name=name)

    def dm_put(self, peer: str, buf: str, offset: int, stag: int, rma_addr: int, length: int,
               timeout_ms: int = None, check: bool = True) -> dict:
        """Put_Data: len bytes of our buf at offset -> the peer's (stag, rma_addr)."""
        return self.request("dm_put", peer=peer, buf=buf, offset=offset, stag=stag,
                            rma_addr=rma_addr, len=length, timeout_ms=timeout_ms, check=check)

    def dm_get(self, peer: str, buf: str, offset: int, stag: int, rma_addr: int, length: int,
               timeout_ms: int = None, check: bool = True) -> dict:
        """Get_Data: the peer's (stag, rma_addr) -> our buf at offset."""
        return self.request("dm_get", peer=peer, buf=buf, offset=offset, stag=stag,
                            rma_addr=rma_addr, len=length, timeout_ms=timeout_ms, check=check)

    def buf(self, name: str, size: int, access: str = "rw", scope: int = None) -> dict:
        """Register a buffer: {"stag": int, "rma_base": int, "size": int}."""
        r = self.request("buf", name=name, size=size, access=access, scope=scope)
        r["stag"] = int(r["stag"])
        r["rma_base"] = int(r["rma_base"])
        return r

    def buf_write(self, name: str, offset: int, data: bytes) -> dict:
        return self.request("buf_write", name=name, offset=offset, data=bytes(data))

    def buf_read(self, name: str, offset: int, length: int) -> bytes:
        return bytes.fromhex(self.request("buf_read", name=name, offset=offset,
                                          len=length)["data"])

    def buf_release(self, name: str, check: bool = True) -> dict:
        return self.request("buf_release", name=name, check=check)

    def stats(self) -> dict:
        r = self.request("stats")
        return {k: int(v) if k in _STATS_FIELDS else v for k, v in r.items()}
