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


def test_the_regional_networks_file_names_and_metadata(tmp_path, capsys):
    """Issue 24: the larger networks' folders and file names (Austin's AM-peak trips file,
    chicago-regional's lower-case folder, Berlin-Center's lower-case prefix, Philadelphia's
    toll file), and their metadata checked against the READMEs (warnings, not errors)."""
    root = tmp_path / "mirror"
    layout = {
        "chicago-regional": {"ChicagoRegional_net.tntp": _header(1790, 12982, 39018,
                                                                 toll_factor=0.1,
                                                                 distance_factor=0.25),
                             "ChicagoRegional_trips.tntp": "<NUMBER OF ZONES> 1790\n",
                             "ChicagoRegional_node.tntp": "node x y\n",
                             "ChicagoRegional_flow.tntp": "From To Volume Cost\n"},
        "Austin": {"Austin_net.tntp": _header(7388, 7388, 18961),
                   "Austin_trips_am.tntp": "<NUMBER OF ZONES> 7388\n"},
        "Philadelphia": {"Philadelphia_net.tntp": _header(1525, 13389, 40003),  # no toll tag
                         "Philadelphia_trips.tntp": "x", "Philadelphia_toll.tntp": "t"},
        "Berlin-Center": {"berlin-center_net.tntp": _header(865, 12981, 28000),  # a revision
                          "berlin-center_trips.tntp": "x"},
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
    assert "Austin_net.tntp is not a TNTP network file" in err and "END OF METADATA" in err
    assert not cache.exists()
