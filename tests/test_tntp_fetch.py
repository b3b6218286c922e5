"""``lbtheory tntp fetch`` against a local file:// mirror made here (no network access)."""

import json
import shutil
from pathlib import Path

import pytest

from lbtheory.cli import main
from lbtheory.games.tntp import load_tntp_game

EX = Path(__file__).resolve().parents[1] / "examples" / "tntp" / "Braess-Example"


@pytest.fixture
def mirror(tmp_path):
    root = tmp_path / "mirror"
    (root / "Braess-Example").mkdir(parents=True)
    for kind in ("net", "trips"):
        shutil.copy(EX / f"Braess_{kind}.tntp", root / "Braess-Example" / f"Braess_{kind}.tntp")
    return root


def test_fetch_from_a_file_mirror(tmp_path, mirror, capsys):
    cache = tmp_path / "cache"
    code = main(["tntp", "fetch", "Braess", "--cache", str(cache), "--mirror",
                 mirror.as_uri(), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["node"] is None  # not on this mirror: optional
    for kind in ("net", "trips"):
        got = Path(out[kind])
        assert got == cache / "Braess-Example" / f"Braess_{kind}.tntp"
        assert got.read_bytes() == (EX / f"Braess_{kind}.tntp").read_bytes()
    assert load_tntp_game(out["net"], out["trips"]).total_demand == 6.0
    assert sorted(p.name for p in (cache / "Braess-Example").iterdir()) == [
        "Braess_net.tntp", "Braess_trips.tntp"]  # no temporary files left


def test_fetch_errors_exit_2_with_one_line(tmp_path, mirror, capsys):
    cache = tmp_path / "cache"
    assert main(["tntp", "fetch", "Nowhere", "--cache", str(cache)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "unknown TNTP network 'Nowhere'" in err \
        and "SiouxFalls" in err and err.count("\n") == 1
    # trips missing on the mirror: nothing is written to the cache (atomic)
    (mirror / "Braess-Example" / "Braess_trips.tntp").unlink()
    assert main(["tntp", "fetch", "Braess", "--cache", str(cache), "--mirror",
                 mirror.as_uri()]) == 2
    err = capsys.readouterr().err
    assert "cannot download" in err and "Braess_trips.tntp" in err
    assert not (cache / "Braess-Example").exists()  # not even an empty folder is left
    # an unreachable mirror
    assert main(["tntp", "fetch", "Braess", "--cache", str(cache), "--mirror",
                 (tmp_path / "no-such-dir").as_uri()]) == 2
    assert "cannot download" in capsys.readouterr().err
    assert main(["tntp", "fetch", "Braess", "--cache", str(cache), "--mirror",
                 "ftp://example.org"]) == 2
    assert "--mirror must be an http://, https:// or file:// URL" in capsys.readouterr().err


def test_a_trickling_mirror_is_cut_off_by_the_whole_download_timeout(tmp_path, capsys):
    """A loopback HTTP mirror that sends one byte every 0.2 s: each read succeeds well within a
    socket timeout, so only a whole-download deadline stops it; nothing is left in the cache."""
    import http.server
    import threading
    import time

    class Trickle(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            try:
                for _ in range(1000):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cache = tmp_path / "cache"
    t0 = time.monotonic()
    try:
        rc = main(["tntp", "fetch", "Braess", "--cache", str(cache), "--mirror",
                   f"http://127.0.0.1:{server.server_address[1]}", "--timeout", "1"])
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    assert rc == 2 and "longer than --timeout 1 s" in err and err.count("\n") == 1
    assert time.monotonic() - t0 < 5.0  # cut off, not read to the end (200 s)
    assert not cache.exists() or not any(cache.rglob("*"))


def _header(zones, nodes, links, **tags):
    extra = "".join(f"<{k.replace('_', ' ').upper()}> {v}\n" for k, v in tags.items())
    return (f"<NUMBER OF ZONES> {zones}\n<NUMBER OF NODES> {nodes}\n<FIRST THRU NODE> "
            f"{zones + 1}\n<NUMBER OF LINKS> {links}\n{extra}<END OF METADATA>\n")


def _net(zones, nodes, links, **tags):
    """A complete network file with these counts: link k joins node k mod n to the next one
    (offsets grow past a full ring), so it agrees with its own metadata."""
    rows = [f"\t{k % nodes + 1}\t{(k + 1 + k // nodes) % nodes + 1}\t100\t1\t1\t0.15\t4\t0"
            f"\t0\t1\t;" for k in range(links)]
    return _header(zones, nodes, links, **tags) + "\n".join(rows) + "\n"


def _trips(zones):
    return (f"<NUMBER OF ZONES> {zones}\n<TOTAL OD FLOW> 1\n<END OF METADATA>\n"
            f"Origin 1\n    2 :   1.0;\n")


def test_the_regional_networks_file_names_and_metadata(tmp_path, capsys):
    """Issue 24: the larger networks' folders and file names (Austin's AM-peak trips file,
    chicago-regional's lower-case folder, Berlin-Center's lower-case prefix, Philadelphia's
    toll file), and their metadata checked against the READMEs (warnings, not errors)."""
    root = tmp_path / "mirror"
    layout = {
        "chicago-regional": {"ChicagoRegional_net.tntp": _net(1790, 12982, 39018,
                                                              toll_factor=0.1,
                                                              distance_factor=0.25),
                             "ChicagoRegional_trips.tntp": _trips(1790),
                             "ChicagoRegional_node.tntp": "node x y\n",
                             "ChicagoRegional_flow.tntp": "From To Volume Cost\n"},
        "Austin": {"Austin_net.tntp": _net(7388, 7388, 18961),
                   "Austin_trips_am.tntp": _trips(7388)},
        "Philadelphia": {"Philadelphia_net.tntp": _net(1525, 13389, 40003),  # no toll tag
                         "Philadelphia_trips.tntp": _trips(1525), "Philadelphia_toll.tntp": "t"},
        "Berlin-Center": {"berlin-center_net.tntp": _net(865, 12981, 28000),  # a revision
                          "berlin-center_trips.tntp": _trips(865)},
    }
    for folder, files in layout.items():
        (root / folder).mkdir(parents=True)
        for fname, text in files.items():
            (root / folder / fname).write_text(text)
    cache = tmp_path / "cache"
    fetch = ["tntp", "fetch", "--cache", str(cache), "--mirror", root.as_uri(), "--json"]
    assert main([*fetch[:2], "ChicagoRegional", *fetch[2:]]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["net"] == str(cache / "chicago-regional" / "ChicagoRegional_net.tntp")
    assert Path(out["flow"]).name == "ChicagoRegional_flow.tntp" and out["node"]
    assert out["warnings"] == [] and out["extra"] == []
    assert main([*fetch[:2], "Austin", *fetch[2:]]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trips"] == str(cache / "Austin" / "Austin_trips_am.tntp")
    assert out["node"] is None and out["warnings"] == []
    assert main([*fetch[:2], "Philadelphia", *fetch[2:]]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [Path(p).name for p in out["extra"]] == ["Philadelphia_toll.tntp"]
    assert out["warnings"] == [
        "Philadelphia_net.tntp: <TOLL FACTOR> is absent (0), the Philadelphia README gives "
        "0.055: link costs use the file's value; add '<TOLL FACTOR> 0.055' to its metadata "
        "for the README's generalised cost"]
    # without --json the warnings go to stderr, the paths to stdout
    assert main(["tntp", "fetch", "BerlinCenter", "--cache", str(cache), "--mirror",
                 root.as_uri()]) == 0
    cap = capsys.readouterr()
    assert "berlin-center_net.tntp" in cap.out and "flow: (not on the mirror)" in cap.out
    assert cap.err == ("warning: berlin-center_net.tntp: <NUMBER OF LINKS> is 28000, the "
                       "Berlin-Center README says 28376\n")


def test_a_git_lfs_pointer_or_a_non_tntp_file_is_refused_and_nothing_written(tmp_path, capsys):
    root = tmp_path / "mirror" / "Austin"
    root.mkdir(parents=True)
    (root / "Austin_net.tntp").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 12345\n")
    (root / "Austin_trips_am.tntp").write_text("x")
    cache = tmp_path / "cache"
    args = ["tntp", "fetch", "Austin", "--cache", str(cache), "--mirror",
            (tmp_path / "mirror").as_uri()]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Austin_net.tntp is a Git LFS pointer" in err and "media.githubusercontent.com" in err
    assert not cache.exists()
    (root / "Austin_net.tntp").write_text("<html>not found</html>\n")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Austin_net.tntp is not a valid TNTP net file" in err and "END OF METADATA" in err
    assert not cache.exists()


# ----------------------------------------------------------------------------- issue 34
def _bad_mirrors() -> dict[str, dict[str, str | bytes]]:
    """The mirrors the issue found accepted: a header-only net with garbage trips, Austin with
    2 of its links, a binary trips file, a file without any newline, a trips file whose zones
    differ from the network's."""
    braess = (EX / "Braess_net.tntp").read_text()
    trips = (EX / "Braess_trips.tntp").read_text()
    return {
        "header-only net, garbage trips": {"Braess_net.tntp": braess.split("<END OF METADATA>")[0]
                                           + "<END OF METADATA>\n",
                                           "Braess_trips.tntp": "garbage\n"},
        "2 of 5 links": {"Braess_net.tntp": "\n".join(braess.splitlines()[:-3]) + "\n",
                         "Braess_trips.tntp": trips},
        "binary trips": {"Braess_net.tntp": braess,
                         "Braess_trips.tntp": b"<NUMBER OF ZONES> 2\n\x00\x01\x02\xff" * 10},
        "no newline": {"Braess_net.tntp": braess, "Braess_trips.tntp": "1 " * 700_000},
        "zones differ": {"Braess_net.tntp": braess,
                         "Braess_trips.tntp": trips.replace("<NUMBER OF ZONES> 2",
                                                            "<NUMBER OF ZONES> 3")},
    }


@pytest.mark.parametrize("case", list(_bad_mirrors()))
def test_a_bad_mirror_never_replaces_a_good_cache(tmp_path, mirror, capsys, case):
    """A good cached Braess stays byte for byte when the mirror serves an incomplete or invalid
    network; one error line names the file (and the line where there is one); exit 2."""
    cache = tmp_path / "cache"
    args = ["tntp", "fetch", "Braess", "--cache", str(cache), "--mirror", mirror.as_uri()]
    assert main(args) == 0
    capsys.readouterr()
    folder = cache / "Braess-Example"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    for fname, content in _bad_mirrors()[case].items():
        target = mirror / "Braess-Example" / fname
        target.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert "the cache was left as it was" in err and ("_net.tntp" in err or "_trips" in err)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert sorted(p.name for p in cache.iterdir()) == ["Braess-Example"]  # no staging left


def test_fetch_replaces_a_cached_network_atomically_and_keeps_other_files(tmp_path, mirror,
                                                                          capsys):
    cache = tmp_path / "cache"
    args = ["tntp", "fetch", "Braess", "--cache", str(cache), "--mirror", mirror.as_uri()]
    assert main(args) == 0
    folder = cache / "Braess-Example"
    (folder / "my_notes.txt").write_text("mine")
    net = mirror / "Braess-Example" / "Braess_net.tntp"
    net.write_text(net.read_text().replace("\t50\t0.02\t", "\t51\t0.02\t"))  # a revision
    assert main(args) == 0
    capsys.readouterr()
    assert (folder / "Braess_net.tntp").read_bytes() == net.read_bytes()
    assert (folder / "my_notes.txt").read_text() == "mine"
    assert load_tntp_game(folder / "Braess_net.tntp", folder / "Braess_trips.tntp").n_arcs == 5


def test_fetch_killed_at_random_points_leaves_the_old_or_the_new_network(tmp_path):
    """SIGKILL ``tntp fetch`` at seeded random moments while it downloads, parses and installs a
    large network over a cached one: afterwards the cache folder is exactly the old files or
    exactly the new ones, and a rerun completes."""
    import os
    import random
    import signal
    import subprocess
    import sys
    import time

    old = tmp_path / "mirror-old" / "Braess-Example"
    new = tmp_path / "mirror-new" / "Braess-Example"
    old.mkdir(parents=True)
    new.mkdir(parents=True)
    for kind in ("net", "trips"):
        shutil.copy(EX / f"Braess_{kind}.tntp", old / f"Braess_{kind}.tntp")
    (new / "Braess_net.tntp").write_text(_net(2, 30000, 60000))  # ≈ 2 MB, parsed in ≈ 1 s
    (new / "Braess_trips.tntp").write_text(_trips(2))
    cache = tmp_path / "cache"
    lbtheory = str(Path(sys.executable).with_name("lbtheory"))
    cmd = [lbtheory, "tntp", "fetch", "Braess", "--cache", str(cache), "--mirror"]
    subprocess.run([*cmd, old.parent.as_uri()], check=True, capture_output=True, timeout=120)
    folder = cache / "Braess-Example"
    snap_old = {p.name: p.read_bytes() for p in old.iterdir()}
    snap_new = {p.name: p.read_bytes() for p in new.iterdir()}
    rng = random.Random(34)
    states = []
    for _ in range(5):
        proc = subprocess.Popen([*cmd, new.parent.as_uri()], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        # past the interpreter's start-up, then a random moment of download/parse/install
        deadline = time.monotonic() + 60
        while (proc.poll() is None and time.monotonic() < deadline
               and not list(cache.glob(".Braess-Example.fetch-*"))):
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        now = {p.name: p.read_bytes() for p in folder.iterdir()} if folder.exists() else None
        if now is None:  # the two-rename fallback was cut between its renames
            assert list(cache.glob(".Braess-Example.old-*"))
            states.append("set aside")
            continue
        assert now in (snap_old, snap_new), sorted(now)
        states.append("new" if now == snap_new else "old")
        if now == snap_new:  # start over from the old network
            subprocess.run([*cmd, old.parent.as_uri()], check=True, capture_output=True,
                           timeout=120, env=os.environ)
    r = subprocess.run([*cmd, new.parent.as_uri()], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == snap_new
    assert "old" in states or "new" in states
