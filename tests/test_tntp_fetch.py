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
