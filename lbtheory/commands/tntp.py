"""``lbtheory tntp fetch NAME --cache DIR``: download a TNTP network for users with a connection.

The files of network NAME in the "Transportation Networks for Research" repository
(github.com/bstabler/TransportationNetworks) — the network and trip table (required), and the
node coordinates, best-known flows and other listed files when the mirror has them — are
downloaded with urllib from ``--mirror`` (default :data:`DEFAULT_MIRROR`; any ``https://``,
``http://`` or ``file://`` URL laid out like the repository: ``<mirror>/<folder>/<file>``) into
``DIR/<folder>/``. File names follow each folder's own convention (:data:`NETWORKS`: mostly
``<prefix>_net.tntp`` / ``_trips.tntp``, but ``Austin_trips_am.tntp``, lower-case
``berlin-center_*`` in ``Berlin-Center/``, ``ChicagoRegional_*`` in ``chicago-regional/``).
Every file is first downloaded into a private temporary directory (outside the cache) and moved
in only when all required files arrived and the network file's metadata could be read, so the
cache never holds a partial network, and a failed or killed fetch leaves nothing in it (not even
an empty folder). A Git LFS pointer in place of a file (the raw URL of a file stored with LFS)
is refused with the media URL to use instead. ``--timeout`` bounds each file's whole download (a
mirror trickling one byte per second is cut off), not only each socket read.

Metadata conventions checked against what each folder's README states (:class:`Source`): the
zone, node and link counts of the network file's header, and the generalised-cost weights
``<TOLL FACTOR>`` / ``<DISTANCE FACTOR>`` (the reader applies them only when the file has the
tags; a README weight the file lacks is reported, with the tag to add). Differences are
warnings, not errors: repository files are revised. Prints the paths and warnings (or one JSON
object with ``--json``: ``net``, ``trips``, ``node`` (null if absent), ``flow`` (null if
absent), ``extra`` (list) and ``warnings`` (list)). Nothing is shipped in the repository.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import tempfile
from pathlib import Path

NAME = "tntp"
HELP = ("Download a TNTP network (net, trips, node files) from the Transportation Networks "
        "repository or a mirror into a cache directory.")
EPILOG = ("examples:\n"
          "  lbtheory tntp fetch SiouxFalls --cache ~/.cache/tntp\n"
          "  lbtheory tntp fetch ChicagoRegional --cache ~/.cache/tntp --timeout 600\n"
          "  lbtheory tntp fetch Braess --cache ~/.cache/tntp --mirror file:///srv/tntp-mirror\n"
          "  lbtheory equilibrium ~/.cache/tntp/SiouxFalls/SiouxFalls_net.tntp \\\n"
          "      --trips ~/.cache/tntp/SiouxFalls/SiouxFalls_trips.tntp")

#: Raw-file root of the TransportationNetworks GitHub repository.
DEFAULT_MIRROR = "https://raw.githubusercontent.com/bstabler/TransportationNetworks/master"

#: Where the repository serves files stored with Git LFS (raw URLs give a pointer instead).
LFS_MIRROR = "https://media.githubusercontent.com/media/bstabler/TransportationNetworks/master"


@dataclasses.dataclass(frozen=True)
class Source:
    """One network of the repository: its folder, file names and README facts.

    Attributes:
        folder: the repository folder; net, trips: the required files; node, flow: optional
            files (coordinates, best-known flows); extra: other optional files.
        size: (zones, nodes, links) from the README's "Dimensions" (None: not checked).
        toll_factor, distance_factor: the README's generalised-cost weights (cost units per
            toll unit / per length unit; 0 when it gives none).
    """

    folder: str
    net: str
    trips: str
    node: str | None = None
    flow: str | None = None
    extra: tuple[str, ...] = ()
    size: tuple[int, int, int] | None = None
    toll_factor: float = 0.0
    distance_factor: float = 0.0


def _std(folder: str, prefix: str, *, node: bool = False, flow: bool = False,
         **facts) -> Source:
    """The usual layout: ``<prefix>_net.tntp``, ``_trips``, ``_node``, ``_flow``."""
    return Source(folder, f"{prefix}_net.tntp", f"{prefix}_trips.tntp",
                  f"{prefix}_node.tntp" if node else None, f"{prefix}_flow.tntp" if flow else None,
                  **facts)


#: Network name → its :class:`Source`. Folder and file names as in the repository (its README
#: summary table and each folder's README); the regional networks' sizes and cost weights from
#: their READMEs (Austin's README: 7,388 zones = nodes, 18,961 links, AM-peak trips).
NETWORKS = {
    "Braess": _std("Braess-Example", "Braess"),
    "SiouxFalls": _std("SiouxFalls", "SiouxFalls", node=True, flow=True, size=(24, 24, 76)),
    "EMA": _std("Eastern-Massachusetts", "EMA", size=(74, 74, 258)),
    "Anaheim": _std("Anaheim", "Anaheim", flow=True, size=(38, 416, 914)),
    "Barcelona": _std("Barcelona", "Barcelona", flow=True, size=(110, 1020, 2522)),
    "Winnipeg": _std("Winnipeg", "Winnipeg", flow=True, size=(147, 1052, 2836)),
    "ChicagoSketch": _std("Chicago-Sketch", "ChicagoSketch", node=True, flow=True,
                          size=(387, 933, 2950), toll_factor=0.02, distance_factor=0.04),
    "Austin": Source("Austin", "Austin_net.tntp", "Austin_trips_am.tntp",
                     size=(7388, 7388, 18961)),
    "ChicagoRegional": _std("chicago-regional", "ChicagoRegional", node=True, flow=True,
                            size=(1790, 12982, 39018), toll_factor=0.1, distance_factor=0.25),
    "Philadelphia": _std("Philadelphia", "Philadelphia", node=True,
                         extra=("Philadelphia_toll.tntp",), size=(1525, 13389, 40003),
                         toll_factor=0.055),
    "BerlinCenter": _std("Berlin-Center", "berlin-center", node=True,
                         size=(865, 12981, 28376)),
}


#: Longest ``--timeout`` (s): about 11.6 days; a socket timeout overflows near 9.2e9 s
#: (int64 nanoseconds), and a longer wait is a typo.
MAX_TIMEOUT_S = 1e6


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ._help import HelpFormatter, number

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
    number(f, "--timeout", default=60.0, low=0.0, low_open=True, high=MAX_TIMEOUT_S, unit="s",
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


def _refuse_lfs_pointer(path: Path, url: str) -> None:
    """DataFormatError when ``path`` holds a Git LFS pointer instead of the file."""
    from ..errors import DataFormatError

    with open(path, "rb") as fh:
        head = fh.read(64)
    if head.startswith(b"version https://git-lfs.github.com/spec/"):
        raise DataFormatError(f"{url} is a Git LFS pointer, not the file: use --mirror "
                              f"{LFS_MIRROR} (files stored with LFS are served there)",
                              field="--mirror")


def check_metadata(src: Source, net: Path) -> list[str]:
    """Warnings where the network file's metadata differs from ``src``'s README facts.

    Raises:
        DataFormatError: the metadata cannot be read (not a TNTP file).
    """
    from ..games.tntp import read_tntp_metadata

    meta = read_tntp_metadata(net)

    def number(key: str, default: str | None) -> float:
        try:
            return float(meta.get(key, default))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return float("nan")

    warnings = []
    if src.size is not None:
        for key, want in zip(("NUMBER OF ZONES", "NUMBER OF NODES", "NUMBER OF LINKS"), src.size):
            if number(key, None) != want:
                warnings.append(f"{net.name}: <{key}> is {meta.get(key)}, the {src.folder} "
                                f"README says {want}")
    for key, want in (("TOLL FACTOR", src.toll_factor), ("DISTANCE FACTOR", src.distance_factor)):
        if number(key, "0") != want:
            warnings.append(f"{net.name}: <{key}> is {meta.get(key, 'absent (0)')}, the "
                            f"{src.folder} README gives {want:g}: link costs use the file's "
                            f"value; add '<{key}> {want:g}' to its metadata for the README's "
                            "generalised cost")
    return warnings


def fetch(name: str, cache: str | os.PathLike, *, mirror: str = DEFAULT_MIRROR,
          timeout: float = 60.0) -> dict:
    """Download network ``name`` into ``cache`` (atomically); returns the files' paths.

    Returns:
        ``{"net": Path, "trips": Path, "node": Path | None, "flow": Path | None,
        "extra": [Path], "warnings": [str]}`` (warnings: :func:`check_metadata`).

    Raises:
        DataFormatError: unknown network name (field ``NAME``, listing the known ones), a
            required file that cannot be downloaded (naming the URL and the reason) or that is
            a Git LFS pointer, a network file without readable metadata, or a mirror URL of
            another scheme.
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
    src = NETWORKS[name]
    dest = Path(cache) / src.folder
    files = [("net", src.net, True), ("trips", src.trips, True), ("node", src.node, False),
             ("flow", src.flow, False)] + [("extra", f, False) for f in src.extra]
    got: list[tuple[str, str, Path]] = []
    with tempfile.TemporaryDirectory(prefix="lbtheory-tntp-") as staging:
        for kind, fname, required in files:
            if fname is None:
                continue
            url = f"{mirror.rstrip('/')}/{src.folder}/{fname}"
            try:
                tmp = _download(url, Path(staging), timeout)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                if not required:
                    continue
                reason = getattr(exc, "reason", None) or exc
                raise DataFormatError(f"cannot download {url}: {reason} (is the mirror "
                                      f"reachable and laid out as <mirror>/{src.folder}/"
                                      f"{fname}?)", field="--mirror") from None
            tmp = tmp.rename(Path(staging) / fname)
            _refuse_lfs_pointer(tmp, url)
            got.append((kind, fname, tmp))
        try:
            warnings = check_metadata(src, got[0][2])
        except DataFormatError as exc:
            where = f"{exc.path}:{exc.line}: " if exc.line else f"{exc.path}: "
            reason = str(exc).removeprefix(where)
            reason = f"line {exc.line}: {reason}" if exc.line else reason
            raise DataFormatError(f"{mirror.rstrip('/')}/{src.folder}/{src.net} is not a TNTP "
                                  f"network file ({reason})", field="--mirror") from exc
        dest.mkdir(parents=True, exist_ok=True)  # only now: a failed fetch leaves no folder
        out: dict = {"net": None, "trips": None, "node": None, "flow": None, "extra": [],
                     "warnings": warnings}
        for kind, fname, tmp in got:
            final = dest / fname
            shutil.move(tmp, final)  # the staging folder may be on another file system
            if kind == "extra":
                out["extra"].append(final)
            else:
                out[kind] = final
        return out


def run(args: argparse.Namespace) -> int:
    import sys

    from ..io import dumps_json

    paths = fetch(args.name, args.cache, mirror=args.mirror, timeout=args.timeout)
    if args.json:
        out = {k: (str(v) if isinstance(v, Path) else v) for k, v in paths.items()}
        out["extra"] = [str(p) for p in paths["extra"]]
        print(dumps_json(out))
        return 0
    for kind in ("net", "trips", "node", "flow"):
        print(f"{kind:>5}: {paths[kind] if paths[kind] else '(not on the mirror)'}")
    for p in paths["extra"]:
        print(f"extra: {p}")
    for w in paths["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    return 0
