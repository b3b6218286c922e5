"""``lbtheory tntp fetch NAME --cache DIR``: download a TNTP network for users with a connection.

The files of network NAME in the "Transportation Networks for Research" repository
(github.com/bstabler/TransportationNetworks) — the network and trip table (required), and the
node coordinates, best-known flows and other listed files when the mirror has them — are
downloaded with urllib from ``--mirror`` (default :data:`DEFAULT_MIRROR`; any ``https://``,
``http://`` or ``file://`` URL laid out like the repository: ``<mirror>/<folder>/<file>``) into
``DIR/<folder>/``. File names follow each folder's own convention (:data:`NETWORKS`: mostly
``<prefix>_net.tntp`` / ``_trips.tntp``, but ``Austin_trips_am.tntp``, lower-case
``berlin-center_*`` in ``Berlin-Center/``, ``ChicagoRegional_*`` in ``chicago-regional/``).
Every file is first downloaded into a staging folder inside the cache and the folder replaces
``DIR/<folder>/`` in one step (an atomic exchange) only when all required files arrived and the
network, trips and flow files parse completely and agree with their own metadata (link, node and
zone counts) and with each other, so the cache never holds a partial or invalid network, and a
failed or killed fetch leaves the previous folder as it was. A Git LFS pointer in place of a
file (the raw URL of a file stored with LFS) is refused with the media URL to use instead.
``--timeout`` bounds each file's whole download (a mirror trickling one byte per second is cut
off), not only each socket read.

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
import contextlib
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


def _verify(src: Source, got: list[tuple[str, str, Path]], url_of: dict[str, str]) -> list[str]:
    """Parse every downloaded TNTP file completely and check the files agree (the trips file's
    zones are the network's); returns :func:`check_metadata`'s warnings.

    Raises:
        DataFormatError: a file that does not parse completely or agree with its own metadata
            (link, node and zone counts), naming its URL, the line and the reason.
    """
    from ..errors import DataFormatError
    from ..games.tntp import read_tntp_flow, read_tntp_network, read_tntp_trips

    paths = {kind: p for kind, _, p in got if kind != "extra"}

    def checked(kind: str, reader):
        try:
            return reader(paths[kind])
        except DataFormatError as exc:
            where = f"{exc.path}:{exc.line}: " if exc.line else f"{exc.path}: "
            reason = str(exc).removeprefix(where)
            reason = f"line {exc.line}: {reason}" if exc.line else reason
            raise DataFormatError(f"{url_of[kind]} is not a valid TNTP {kind} file ({reason}); "
                                  f"the cache was left as it was", field="--mirror") from exc

    net = checked("net", read_tntp_network)
    trips = checked("trips", read_tntp_trips)
    if trips.zones != net.zones:
        raise DataFormatError(f"{url_of['trips']}: <NUMBER OF ZONES> {trips.zones} differs from "
                              f"the network's {net.zones}; the cache was left as it was",
                              field="--mirror")
    if "flow" in paths:
        checked("flow", read_tntp_flow)
    return check_metadata(src, paths["net"])


#: A staging or replaced folder (``.<folder>.fetch-*`` / ``.<folder>.old-*`` in the cache)
#: older than this (s) belongs to a killed fetch and is removed by the next one.
STALE_S: float = 600.0


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where the
    call is not available, so the caller falls back to two renames."""
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def _recover(root: Path, folder: str) -> None:
    """Undo what a fetch killed mid-swap left (the two-rename fallback: the old folder set
    aside, the new one not yet in place) and remove stale staging folders."""
    import time

    dest = root / folder
    olds = sorted(root.glob(f".{folder}.old-*"), key=lambda p: p.stat().st_mtime)
    if not dest.exists() and olds:
        olds.pop().rename(dest)
    now = time.time()
    for p in [*olds, *root.glob(f".{folder}.fetch-*")]:
        try:
            if now - p.stat().st_mtime > STALE_S:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:  # pragma: no cover - removed meanwhile
            pass


def _install(staging: Path, dest: Path) -> None:
    """Put the complete folder ``staging`` at ``dest`` in one step: a rename when ``dest`` is
    new, an atomic exchange otherwise (files of the old folder that this fetch did not bring,
    e.g. an optional file the mirror no longer has, are carried over first)."""
    if dest.exists():
        for old in dest.iterdir():
            if not (staging / old.name).exists() and old.is_file():
                shutil.copy2(old, staging / old.name)
        if _exchange(staging, dest):
            shutil.rmtree(staging, ignore_errors=True)  # now holds the old folder
            return
        aside = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        dest.rename(aside)  # killed here: the next fetch's _recover renames it back
        staging.rename(dest)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        staging.rename(dest)


def fetch(name: str, cache: str | os.PathLike, *, mirror: str = DEFAULT_MIRROR,
          timeout: float = 60.0) -> dict:
    """Download network ``name`` into ``cache`` (verified, atomically); returns the files' paths.

    Every file is downloaded into a staging folder inside ``cache``, then the network, trips
    and flow files are parsed completely (link, node and zone counts checked against their
    metadata, the trips file's zones against the network's); only then does the new folder
    replace ``cache/<folder>`` in one step. Any failure — or a kill at any point — leaves the
    cache as it was.

    Returns:
        ``{"net": Path, "trips": Path, "node": Path | None, "flow": Path | None,
        "extra": [Path], "warnings": [str]}`` (warnings: :func:`check_metadata`).

    Raises:
        DataFormatError: unknown network name (field ``NAME``, listing the known ones), a
            required file that cannot be downloaded (naming the URL and the reason) or that is
            a Git LFS pointer, a file that does not parse completely or disagrees with its
            metadata (naming the URL and line), or a mirror URL of another scheme.
    """
    import urllib.error

    from .._checks import check_real
    from ..errors import DataFormatError

    check_real(timeout, "--timeout", unit="s", low=0.0, low_open=True, high=1e6)
    if name not in NETWORKS:
        raise DataFormatError(f"unknown TNTP network {name!r}; known: {', '.join(NETWORKS)}",
                              field="NAME")
    if mirror.split(":", 1)[0].lower() not in ("http", "https", "file"):
        raise DataFormatError(f"--mirror must be an http://, https:// or file:// URL, got "
                              f"{mirror!r}", field="--mirror")
    src = NETWORKS[name]
    root = Path(cache)
    created = not root.exists()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise DataFormatError(f"--cache {str(root)!r} is not a directory",
                              field="--cache") from None
    _recover(root, src.folder)
    dest = root / src.folder
    files = [("net", src.net, True), ("trips", src.trips, True), ("node", src.node, False),
             ("flow", src.flow, False)] + [("extra", f, False) for f in src.extra]
    got: list[tuple[str, str, Path]] = []
    url_of: dict[str, str] = {}
    staging = Path(tempfile.mkdtemp(dir=root, prefix=f".{src.folder}.fetch-"))
    try:
        for kind, fname, required in files:
            if fname is None:
                continue
            url = f"{mirror.rstrip('/')}/{src.folder}/{fname}"
            try:
                tmp = _download(url, staging, timeout)
            except (urllib.error.URLError, OSError, ValueError, OverflowError) as exc:
                if not required:
                    continue
                reason = getattr(exc, "reason", None) or exc
                raise DataFormatError(f"cannot download {url}: {reason} (is the mirror "
                                      f"reachable and laid out as <mirror>/{src.folder}/"
                                      f"{fname}?)", field="--mirror") from None
            tmp = tmp.rename(staging / fname)
            _refuse_lfs_pointer(tmp, url)
            got.append((kind, fname, tmp))
            url_of[kind] = url
        warnings = _verify(src, got, url_of)
        _install(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if created:
            with contextlib.suppress(OSError):
                root.rmdir()  # only when empty: a failed fetch into a new cache leaves nothing
        raise
    out: dict = {"net": None, "trips": None, "node": None, "flow": None, "extra": [],
                 "warnings": warnings}
    for kind, fname, _ in got:
        if kind == "extra":
            out["extra"].append(dest / fname)
        else:
            out[kind] = dest / fname
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
