"""``lbtheory tntp fetch NAME --cache DIR``: download a TNTP network for users with a connection.

Files ``<prefix>_net.tntp`` and ``<prefix>_trips.tntp`` (required) and ``<prefix>_node.tntp``
(when the mirror has it) of the "Transportation Networks for Research" repository are downloaded
with urllib from ``--mirror`` (default :data:`DEFAULT_MIRROR`; any ``https://``, ``http://`` or
``file://`` URL laid out like the repository: ``<mirror>/<folder>/<prefix>_net.tntp``) into
``DIR/<folder>/``. Every file is first downloaded into a private temporary directory (outside the
cache) and moved in only when all required files arrived, so the cache never holds a partial
network, and a failed or killed fetch leaves nothing in it (not even an empty folder).
``--timeout`` bounds each file's whole download (a mirror trickling one byte per second is cut
off), not only each socket read. Prints the paths (or one
JSON object with ``--json``: ``net``, ``trips``, ``node`` (null if absent)). Nothing is shipped
in the repository.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

NAME = "tntp"
HELP = ("Download a TNTP network (net, trips, node files) from the Transportation Networks "
        "repository or a mirror into a cache directory.")
EPILOG = ("examples:\n"
          "  lbtheory tntp fetch SiouxFalls --cache ~/.cache/tntp\n"
          "  lbtheory tntp fetch Braess --cache ~/.cache/tntp --mirror file:///srv/tntp-mirror\n"
          "  lbtheory equilibrium ~/.cache/tntp/SiouxFalls/SiouxFalls_net.tntp \\\n"
          "      --trips ~/.cache/tntp/SiouxFalls/SiouxFalls_trips.tntp")

#: Raw-file root of the TransportationNetworks GitHub repository.
DEFAULT_MIRROR = "https://raw.githubusercontent.com/bstabler/TransportationNetworks/master"

#: Network name → (folder, file prefix) in the repository.
NETWORKS = {
    "Braess": ("Braess-Example", "Braess"),
    "SiouxFalls": ("SiouxFalls", "SiouxFalls"),
    "EMA": ("Eastern-Massachusetts", "EMA"),
    "Anaheim": ("Anaheim", "Anaheim"),
    "Barcelona": ("Barcelona", "Barcelona"),
    "Winnipeg": ("Winnipeg", "Winnipeg"),
    "ChicagoSketch": ("Chicago-Sketch", "ChicagoSketch"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._help import HelpFormatter

    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    f = sub.add_parser("fetch", help="download NAME's net/trips/node files into --cache",
                       description="Download network NAME's net and trips files (and its node "
                                   "file when the mirror has it) into DIR/<folder>/, all or "
                                   "nothing.", epilog=EPILOG, formatter_class=HelpFormatter)
    f.add_argument("name", metavar="NAME", help=f"network, one of {', '.join(NETWORKS)}")
    f.add_argument("--cache", required=True, metavar="DIR", help="cache directory")
    f.add_argument("--mirror", default=DEFAULT_MIRROR, metavar="URL",
                   help="repository root URL (https://, http:// or file://; default the "
                        "TransportationNetworks GitHub raw URL)")
    f.add_argument("--timeout", type=float, default=60.0,
                   help="whole-download limit per file (s)")
    f.add_argument("--json", action="store_true", help="print one JSON object")


def _download(url: str, dest_dir: Path, timeout: float) -> Path:
    """Download ``url`` into ``dest_dir`` within ``timeout`` seconds in all; raises OSError
    subclasses (``TimeoutError`` when the deadline passes)."""
    import time
    import urllib.request

    deadline = time.monotonic() + timeout
    fd, tmp = tempfile.mkstemp(dir=dest_dir, prefix=".part-")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            read = getattr(resp, "read1", resp.read)  # read1: whatever has arrived, at once
            while chunk := read(1 << 16):
                out.write(chunk)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"took longer than --timeout {timeout:g} s")
    except BaseException:
        os.unlink(tmp)
        raise
    return Path(tmp)


def fetch(name: str, cache: str | os.PathLike, *, mirror: str = DEFAULT_MIRROR,
          timeout: float = 60.0) -> dict[str, Path | None]:
    """Download network ``name`` into ``cache`` (atomically); returns the files' paths.

    Raises:
        DataFormatError: unknown network name (field ``NAME``, listing the known ones), a
            required file that cannot be downloaded (naming the URL and the reason), or a
            mirror URL of another scheme.
    """
    import urllib.error

    from .._checks import check_real
    from ..errors import DataFormatError

    check_real(timeout, "--timeout", unit="s", low=0.0, low_open=True)
    if name not in NETWORKS:
        raise DataFormatError(f"unknown TNTP network {name!r}; known: {', '.join(NETWORKS)}",
                              field="NAME")
    if mirror.split(":", 1)[0].lower() not in ("http", "https", "file"):
        raise DataFormatError(f"--mirror must be an http://, https:// or file:// URL, got "
                              f"{mirror!r}", field="--mirror")
    folder, prefix = NETWORKS[name]
    dest = Path(cache) / folder
    got: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="lbtheory-tntp-") as staging:
        for kind in ("net", "trips", "node"):
            url = f"{mirror.rstrip('/')}/{folder}/{prefix}_{kind}.tntp"
            try:
                got[kind] = _download(url, Path(staging), timeout)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                if kind == "node":  # optional
                    continue
                reason = getattr(exc, "reason", None) or exc
                raise DataFormatError(f"cannot download {url}: {reason} (is the mirror "
                                      f"reachable and laid out as <mirror>/{folder}/"
                                      f"{prefix}_{kind}.tntp?)", field="--mirror") from None
        dest.mkdir(parents=True, exist_ok=True)  # only now: a failed fetch leaves no folder
        out: dict[str, Path | None] = {"net": None, "trips": None, "node": None}
        for kind, tmp in got.items():
            final = dest / f"{prefix}_{kind}.tntp"
            shutil.move(tmp, final)  # the staging folder may be on another file system
            out[kind] = final
        return out


def run(args: argparse.Namespace) -> int:
    from ..io import dumps_json

    paths = fetch(args.name, args.cache, mirror=args.mirror, timeout=args.timeout)
    if args.json:
        print(dumps_json({k: (str(v) if v else None) for k, v in paths.items()}))
    else:
        for kind, p in paths.items():
            print(f"{kind:>5}: {p if p else '(not on the mirror)'}")
    return 0
