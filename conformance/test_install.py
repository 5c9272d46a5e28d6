"""make install, and what a box runs from it: the installed tree, the
manual pages against the programs they describe, the systemd unit, the
extended host's library through pkg-config, and boxes set up from
/etc/tptraid/targets.conf by the unit's own command lines (tpt-raid(7),
"Running it as a service"), the controller's array assembled again at its
next start from the state file the configuration names."""
import os
import re
import shlex
import subprocess
import time

import pytest

from tptlib import cluster, paths
from tptlib.cluster import IQN

UNIT = "tpt-tgtd.service"
USER_TOOLS = ("tpt-iscsi-io", "tpt-dd", "tpt-scrub", "tpt-iscsi-verify")
MEMBER_BYTES = 32 << 20


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    """The tree make install writes with PREFIX set to a temporary
    directory (no DESTDIR: the unit's paths are then real ones)."""
    where = tmp_path_factory.mktemp("prefix")
    args = ["make", "--no-print-directory", "-C", str(paths.TOP), "install",
            f"PREFIX={where}", f"SYSCONFDIR={where}/etc", f"BUILD={paths.BUILD}"]
    if os.environ.get("TPT_SAN") == "1":
        args.append("SAN=1")
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return where


def page_of(prefix, program):
    for section in "18":
        p = prefix / "share" / "man" / f"man{section}" / f"{program}.{section}"
        if p.exists():
            return p
    return None


def roff_text(page):
    """A page's source with roff's escaped hyphens as plain ones."""
    return page.read_text().replace("\\-", "-").replace("\\%", "")


def test_install_puts_every_piece_in_place(prefix):
    for f in ("sbin/tgtd", "sbin/tgtadm", "sbin/tgt-admin",
              *(f"bin/{t}" for t in USER_TOOLS),
              "libexec/tpt-raid/tpt-client", "libexec/tpt-raid/tpt-iscsi-load",
              f"lib/{subprocess.check_output(['gcc', '-print-multiarch'], text=True).strip()}"
              "/nbdkit/plugins/nbdkit-tptraid-plugin.so"):
        assert os.access(prefix / f, os.X_OK), f
    for f in ("include/tpt_initiator.h", "lib/libtptinitiator.a",
              "lib/pkgconfig/tptinitiator.pc", f"lib/systemd/system/{UNIT}",
              "share/doc/tpt-raid/examples/target.conf",
              "share/doc/tpt-raid/examples/controller.conf",
              "share/doc/tpt-raid/protocol.md", "share/man/man7/tpt-raid.7",
              "share/man/man8/tgtadm.8", "share/man/man5/targets.conf.5"):
        assert (prefix / f).is_file(), f
    version = subprocess.run([prefix / "sbin/tgtd", "--version"], capture_output=True,
                             text=True).stdout
    assert "+tpt" in version, version


def test_every_installed_program_has_a_clean_manual_page(prefix):
    """Every program in bin and sbin has a page; ours, and tgt's as built
    from its DocBook, format without a warning."""
    programs = [p.name for d in ("bin", "sbin") for p in (prefix / d).iterdir()]
    missing = [p for p in programs if not page_of(prefix, p)]
    assert not missing, missing
    pages = sorted((prefix / "share" / "man").glob("man*/*"))
    assert len(pages) >= len(programs) + 5
    for page in pages:
        r = subprocess.run(["groff", "-man", "-ww", "-z", "-t", str(page)],
                           capture_output=True, text=True)
        assert r.returncode == 0 and not r.stderr, f"{page.name}: {r.stderr}"


@pytest.mark.parametrize("tool", USER_TOOLS)
def test_each_tools_page_names_every_option_it_takes(prefix, tool):
    """What --help lists (--options, and dd-style key= operands) is all in
    the page: the two cannot drift apart unnoticed."""
    r = subprocess.run([prefix / "bin" / tool, "--help"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    words = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", r.stdout))
    words |= set(re.findall(r"(?<![\w-])([a-z]+)=", r.stdout)) - {"user"}
    page = roff_text(page_of(prefix, tool))
    absent = sorted(w for w in words if w not in page)
    assert words and not absent, f"{tool}: not in its page: {absent}"


def keys_in(source, pattern):
    return set(re.findall(pattern, (paths.TOP / source).read_text()))


def test_the_controller_and_target_pages_name_every_key(prefix):
    """Every --bsopts key the array definition's parser takes and every
    --params key of an array's LU is in tptraid(8); every key of a
    target's LU in tpt-target(8)."""
    controller = roff_text(prefix / "share/man/man8/tptraid.8")
    target = roff_text(prefix / "share/man/man8/tpt-target.8")
    spec = keys_in("controller/array_spec.c", r'strcmp\(key, "(\w+)"\)')
    params = keys_in("usr/tpt_controller/array_params.c", r'strcmp\(key, "(\w+)"\)')
    tkeys = (keys_in("usr/tpt_target/lu.c", r'strcmp\(p, "(tpt\w*)"\)') |
             keys_in("usr/tpt_target/lu.c", r'\{ "(tpt_\w+)", &tpt_bounds'))
    assert len(spec) >= 15 and len(params) >= 4 and len(tkeys) >= 10
    assert not [k for k in spec | params if f"{k}=" not in controller]
    assert not [k for k in tkeys if f"{k}=" not in target]


def test_the_unit_file_verifies(prefix):
    r = subprocess.run(["systemd-analyze", "verify", "--man=no",
                        str(prefix / "lib/systemd/system" / UNIT)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr


def test_an_extended_host_builds_against_the_installed_library(prefix, tmp_path):
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib/pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "tptinitiator"],
                           capture_output=True, text=True, env=env)
    assert flags.returncode == 0, flags.stderr
    src = tmp_path / "host.c"
    src.write_text("#include <tpt_initiator.h>\n#include <stdio.h>\n"
                   "int main(void)\n{\n\tstruct tpt_init_config cfg = { 0 };\n"
                   "\tstruct tpt_init *ctx;\n\tchar err[256];\n\n"
                   "\tcfg.url = \"not a url\";\n"
                   "\tif (tpt_init_new(&cfg, &ctx, err, sizeof(err)) == 0)\n"
                   "\t\treturn 1;\n\tputs(err);\n\treturn 0;\n}\n")
    exe = tmp_path / "host"
    # make SAN=1 installs a sanitized library: its users link the runtimes.
    san = ["-fsanitize=address,undefined"] if os.environ.get("TPT_SAN") == "1" else []
    r = subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", *san, str(src), "-o",
                        str(exe), *shlex.split(flags.stdout)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([exe], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip(), r.stdout + r.stderr


# -- the service ------------------------------------------------------------

def unit_commands(prefix, key, config):
    """The unit's KEY= command lines, as systemd would run them with the
    configuration at `config`."""
    lines = (prefix / "lib/systemd/system" / UNIT).read_text().splitlines()
    return [shlex.split(line.split("=", 1)[1].replace("${TPT_TGTD_CONFIG}", str(config)))
            for line in lines if line.startswith(f"{key}=")]


def run_unit(prefix, t, key, config):
    """Run the unit's KEY= lines against tgtd `t` (whose management socket
    is its own: -C and TGT_IPC_SOCKET, which tgt-admin hands to tgtadm)."""
    env = dict(t.env, PATH=f"{prefix}/sbin:{prefix}/bin:{os.environ['PATH']}")
    for argv in unit_commands(prefix, key, config):
        argv = [argv[0], "-C", str(t.control_port), *argv[1:]]
        r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, f"{' '.join(argv)}: {r.stdout}{r.stderr}"


def from_example(prefix, name, dest, **subst):
    """The installed example configuration, made this box's."""
    text = (prefix / "share/doc/tpt-raid/examples" / name).read_text()
    for old, new in subst.items():
        assert old in text, old
        text = text.replace(old, new)
    dest.write_text(text)
    return dest


def test_boxes_set_up_by_the_service_and_the_array_back_at_its_next_start(
        prefix, tgtd_factory, tmp_path):
    """Targets set up from the example target.conf by the unit's start
    lines, in TPT mode; an array created over them by hand; the
    controller stopped by the unit's stop lines (tgtd exits 0, the array
    stops cleanly) and started again with the example controller.conf,
    which names only the state file: the array is back, optimal, with
    nothing to resync, and the data reads back."""
    targets, urls = [], []
    for i in range(3):
        t = tgtd_factory(name=f"box{i}")
        backing = tmp_path / f"box{i}.img"
        with open(backing, "wb") as f:
            f.truncate(MEMBER_BYTES)
        iqn = f"{IQN}:box{i}"
        conf = from_example(prefix, "target.conf", tmp_path / f"box{i}.conf", **{
            "iqn.2026-11.org.example:box1": iqn,
            "/dev/disk/by-id/REPLACE-WITH-THE-DISK": str(backing),
            "10.0.0.11:4400": f"{t.host}:0",
            "initiator-address 10.0.0.10": f"initiator-address {t.host}"})
        run_unit(prefix, t, "ExecStartPost", conf)
        show = t.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
        assert "TPT mode: on" in show and "Target 1: " + iqn in show, show
        targets.append(t)
        urls.append(t.url(iqn, 1))

    c = tgtd_factory(name="controller")
    state = tmp_path / "array1"
    iqn = f"{IQN}:array1"
    c.new_target(1, iqn)
    c.new_lun(1, 1, str(state), bstype="tptraid",
              bsopts=";\n".join(["raid=5", "unit=64k", "assume_clean=yes", f"dm={c.host}:0",
                                 *(f"member={u}" for u in urls)]))
    data = os.urandom(1 << 20)
    io = str(prefix / "bin/tpt-iscsi-io")
    subprocess.run([io, "write", c.url(iqn, 1), "4096"], input=data, check=True,
                   capture_output=True, timeout=60)

    conf = from_example(prefix, "controller.conf", tmp_path / "controller.conf", **{
        "iqn.2026-11.org.example:array": iqn,
        "/var/lib/tptraid/array1": str(state),
        "initiator-address 10.0.0.0/24": "initiator-address ALL"})
    run_unit(prefix, c, "ExecStop", conf)
    c.proc.wait(30)
    assert c.proc.returncode == 0, c.log()[-3000:]
    since = len(c.log())
    c.start(port=c.port)
    run_unit(prefix, c, "ExecStartPost", conf)
    show = c.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert re.search(r"TPT-RAID: .* state optimal", show), show
    assert "writes in flight" not in c.log()[since:], c.log()[since:]
    r = subprocess.run([io, "read", c.url(iqn, 1), "4096", str(len(data) // 512)],
                       capture_output=True, timeout=60)
    assert r.returncode == 0 and r.stdout == data, r.stderr


@pytest.mark.parametrize("argv, says", [
    (("tpt-scrub", "--unit", "64x", "a", "b", "c"), "a power of two from 4k to 1m"),
    (("tpt-scrub", "--unit", "256", "a", "b", "c"), "a power of two from 4k to 1m"),
    (("tpt-scrub", "a", "b"), "2 member URLs"),
    (("tpt-dd", "iscsi://h/iqn.x:y/1", "of=-", "--timeout", "0"), "--timeout: 1..3600"),
    (("tpt-iscsi-io", "read", "iscsi://h/iqn.x:y/1", "0x10", "1"), "(a decimal number)"),
    (("tpt-iscsi-io", "--chunk", "1x", "capacity", "iscsi://h/iqn.x:y/1"), "with k, m or g"),
])
def test_tools_refuse_bad_arguments_saying_why(prefix, argv, says):
    r = subprocess.run([prefix / "bin" / argv[0], *argv[1:]], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and says in r.stderr, r.stderr


def test_the_service_stops_a_controller_under_load(prefix, tgtd_factory, tmp_path, report):
    """The unit's stop lines while a stock host writes and reads at queue
    depth 8: tgtd exits 0, the host sees its session end (errors, never a
    wrong byte), and the service's start assembles the array again with
    every write the host was told GOOD for on the disks and every stripe's
    parity right."""
    from test_failures import Load, scrub, verify_all   # noqa: E402 (their helpers)

    c = cluster.start(tgtd_factory, n=3, mode="tpt", member_bytes=MEMBER_BYTES)
    state = c.controller.dir / "array.state"
    conf = from_example(prefix, "controller.conf", tmp_path / "controller.conf", **{
        "iqn.2026-11.org.example:array": c.iqn,
        "/var/lib/tptraid/array1": str(state),
        "initiator-address 10.0.0.0/24": "initiator-address ALL"})
    model = tmp_path / "model"
    load = Load(c, model, 20)
    time.sleep(3)
    run_unit(prefix, c.controller, "ExecStop", conf)
    c.controller.proc.wait(30)
    assert c.controller.proc.returncode == 0, c.controller.log()[-3000:]
    res, err = load.result()
    assert res["mismatches"] == 0 and res["writes"] > 0, err
    report(f"service stop under load: {res['writes']} writes {res['reads']} reads before it, "
           f"{res['errors']} errors, 0 wrong bytes; tgtd exited 0")
    c.controller.start(port=c.controller.port)
    run_unit(prefix, c.controller, "ExecStartPost", conf)
    show = c.controller.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    assert re.search(r"TPT-RAID: .* state (optimal|resyncing)", show), show
    deadline = time.monotonic() + 60
    while "state optimal" not in show and time.monotonic() < deadline:
        time.sleep(0.5)
        show = c.controller.tgtadm("--lld", "iscsi", "--mode", "target", "--op", "show").stdout
    verify_all(c, model)
    scrub(c)
