"""File input/output: topology files, atomic writes and run manifests.

Readers raise :class:`~lbtheory.errors.DataFormatError` or :class:`~lbtheory.errors.TopologyError`
naming the file, field (and line where the format has lines). Writers are atomic: they write a
temporary file in the target directory and ``os.replace`` it, so a crash never leaves half a file.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import tempfile
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from .errors import DataFormatError, TopologyError

__all__ = [
    "write_text_atomic",
    "write_bytes_atomic",
    "write_json_atomic",
    "save_figure_atomic",
    "check_output_path",
    "FIGURE_FORMATS",
    "package_versions",
    "run_manifest",
    "load_topology",
    "topology_from_dict",
    "topology_to_dict",
    "SCHEMA_KINDS",
    "schema_text",
    "load_schema",
]


# ----------------------------------------------------------------------------- atomic writes
def write_bytes_atomic(path: str | os.PathLike, data: bytes, *, fsync: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file + ``os.replace``).

    ``fsync=False`` skips flushing the data to disk before the rename (ms per file on a busy
    disk): the file is still never seen half-written by a reader or after a killed process, but
    after a power loss it may be empty — for caches that check what they read (sweep cells).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file normal permissions
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_text_atomic(path: str | os.PathLike, text: str, *, fsync: bool = True) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically (``fsync``: see :func:`write_bytes_atomic`)."""
    return write_bytes_atomic(path, text.encode("utf-8"), fsync=fsync)


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if hasattr(obj, "value") and isinstance(obj.value, str):  # enums
        return obj.value
    if hasattr(obj, "tolist"):  # jax arrays
        return obj.tolist()
    raise TypeError(f"cannot serialise {type(obj).__name__} to JSON")


def to_jsonable(obj: Any) -> Any:
    """Convert numpy/JAX values to plain JSON types; non-finite floats become ``None``."""
    text = json.dumps(obj, default=_json_default, allow_nan=True)
    return _nan_to_none(json.loads(text))


def _nan_to_none(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, list):
        return [_nan_to_none(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _nan_to_none(v) for k, v in obj.items()}
    return obj


def dumps_json(obj: Any, *, indent: int | None = 2) -> str:
    """JSON text of ``obj`` (numpy/JAX arrays allowed); NaN/inf are written as ``null``."""
    return json.dumps(to_jsonable(obj), indent=indent, allow_nan=False)


def write_json_atomic(path: str | os.PathLike, obj: Any, *, indent: int | None = 2,
                      fsync: bool = True) -> Path:
    """Write ``obj`` as JSON to ``path`` atomically (``fsync``: see :func:`write_bytes_atomic`)."""
    return write_text_atomic(path, dumps_json(obj, indent=indent) + "\n", fsync=fsync)


#: File suffixes ``save_figure_atomic`` writes (matplotlib's Agg/vector backends).
FIGURE_FORMATS: tuple[str, ...] = ("png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg",
                                   "tif", "tiff", "webp")


def check_output_path(path: str | os.PathLike, *, what: str = "output", flag: str = "",
                      formats: tuple[str, ...] | None = None) -> Path:
    """Refuse an output path that cannot be written, *before* any work is done.

    Checks that ``path`` is not a directory, that no ancestor is a regular file, that the nearest
    existing ancestor is a writable directory and (``formats`` given) that the suffix is one of
    ``formats``. Nothing is created.

    Args:
        path: the file to be written.
        what: what will be written (``"figure"``), for the message.
        flag: the option that named it (``"--plot"``), for the message.
        formats: accepted suffixes without the dot (``None``: any).

    Raises:
        DataFormatError: naming the target path (and ``flag``) and what was expected.
    """
    p = Path(path)
    field = f"{flag}: " if flag else ""

    def bad(msg: str) -> DataFormatError:
        return DataFormatError(f"{field}cannot write the {what} here: {msg}", path=str(p),
                               field=flag)

    if p.is_dir():
        raise bad("it is an existing directory; give a file name")
    if formats is not None:
        suffix = p.suffix.lower().lstrip(".")
        if suffix not in formats:
            raise bad(f"unsupported file type {p.suffix or '(no suffix)'!r}; expected one of "
                      + ", ".join(f".{f}" for f in formats))
    parent = p.parent
    while True:
        if parent.exists():
            if not parent.is_dir():
                raise bad(f"{str(parent)!r} is a regular file, not a directory")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise bad(f"directory {str(parent)!r} is not writable")
            break
        if parent.parent == parent:
            break
        parent = parent.parent
    return p


def save_figure_atomic(fig: Any, path: str | os.PathLike, **savefig_kwargs: Any) -> Path:
    """Save a matplotlib figure atomically in lbtheory's style (150 dpi, tight bounding box).

    The one save path for every figure: the style of :data:`lbtheory.plotting.STYLE` is applied
    while saving (so ``savefig.dpi``/``savefig.bbox`` hold however the figure was built); the
    format follows the file suffix (one of :data:`FIGURE_FORMATS`).

    Raises:
        DataFormatError: the path cannot be written (see :func:`check_output_path`).
    """
    import io as _io

    import matplotlib

    from .plotting import STYLE

    path = check_output_path(path, what="figure", formats=FIGURE_FORMATS)
    buf = _io.BytesIO()
    fmt = path.suffix.lstrip(".").lower()
    with matplotlib.rc_context(STYLE):
        fig.savefig(buf, format=fmt, **savefig_kwargs)
    return write_bytes_atomic(path, buf.getvalue())


# ----------------------------------------------------------------------------- manifests
_TRACKED_PACKAGES = ("lbtheory", "numpy", "scipy", "jax", "jaxlib", "cvxpy", "clarabel",
                     "matplotlib", "sympy", "pyyaml", "optax")


def package_versions(packages: tuple[str, ...] = _TRACKED_PACKAGES) -> dict[str, str]:
    """Installed versions of the packages results depend on (``"missing"`` if absent)."""
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in packages:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "missing"
    return out


def run_manifest(config: Mapping[str, Any], *, seed: int | None = None) -> dict[str, Any]:
    """A manifest to store next to results: config, seed, package versions, UTC time."""
    import datetime as _dt

    return {
        "config": dict(config),
        "seed": seed,
        "versions": package_versions(),
        "created_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


# ----------------------------------------------------------------------------- topology files
def _topology_error(path: str, msg: str) -> TopologyError:
    return TopologyError(f"{path}: {msg}" if path else msg)


#: Magnitudes accepted for a service-model parameter in a topology file: 0, or between these
#: (in the parameter's own unit: s, req/s, requests). Beyond them the conic programs lose all
#: precision (or overflow), so such values are refused up front.
PARAMETER_RANGE: tuple[float, float] = (1e-9, 1e9)


def _check_service_parameters(spec: Any, where: str, path: str) -> None:
    """Refuse service parameters whose magnitude is outside :data:`PARAMETER_RANGE` (called once
    the model has checked names, types — finite real numbers — and signs)."""
    from .errors import ModelError

    lo, hi = PARAMETER_RANGE
    for key, v in spec.items():
        x = None if key == "model" else float(v)
        if x is not None and x != 0 and not lo <= abs(x) <= hi:
            raise ModelError(f"{path + ': ' if path else ''}{where}.service.{key}: {x:g} is out "
                             f"of the accepted range: expected 0 or a magnitude in "
                             f"[{lo:g}, {hi:g}] (in the parameter's unit)")


#: The file formats with a JSON Schema shipped in ``lbtheory/schemas/`` (``KIND.schema.json``).
SCHEMA_KINDS: tuple[str, ...] = ("topology", "scenario")


def schema_text(kind: str) -> str:
    """The JSON Schema (draft 2020-12) of a topology or scenario file, as shipped in
    ``lbtheory/schemas/KIND.schema.json`` (``lbtheory schema KIND`` prints it; editors validate
    YAML/JSON with it). docs/topology.md describes every field.

    Raises:
        ParameterError: ``kind`` is not one of :data:`SCHEMA_KINDS`.
    """
    from importlib import resources

    from .errors import ParameterError

    if kind not in SCHEMA_KINDS:
        raise ParameterError(f"schema: unknown file format {kind!r}; expected one of "
                             f"{', '.join(SCHEMA_KINDS)}")
    return (resources.files("lbtheory") / "schemas" / f"{kind}.schema.json").read_text("utf-8")


def load_schema(kind: str) -> dict[str, Any]:
    """:func:`schema_text` parsed (a dict)."""
    return json.loads(schema_text(kind))


def topology_from_dict(data: Any, *, path: str = ""):
    """Build a :class:`~lbtheory.network.CellNetwork` from a topology file's data.

    The format is the JSON Schema ``lbtheory/schemas/topology.schema.json`` (``lbtheory schema
    topology``), described field by field in docs/topology.md::

        cells: [{name, replicas, arrival_rate, service: {model, ...}}, ...]
        arcs:  [{from, to, delay}, ...]          # delay: one-way seconds (default 0)

    Raises:
        TopologyError / ModelError: naming the file, the field and the cell or arc.
    """
    from .errors import ModelError
    from .models import model_from_dict
    from .network import Arc, Cell, CellNetwork

    if not isinstance(data, Mapping):
        raise _topology_error(path, f"top level: expected a mapping with 'cells' and 'arcs', "
                                    f"got {type(data).__name__}")
    unknown = sorted(set(data) - {"cells", "arcs", "name", "description"})
    if unknown:
        raise _topology_error(path, f"top level: unknown key(s) {unknown}; expected 'cells', "
                                    f"'arcs' (and optional 'name', 'description')")
    for key in ("cells", "arcs"):
        if key not in data:
            raise _topology_error(path, f"missing top-level key {key!r}")
        if not isinstance(data[key], list):
            raise _topology_error(path, f"{key}: expected a list, got {type(data[key]).__name__}")
    cells = []
    for j, c in enumerate(data["cells"]):
        where = f"cells[{j}]"
        if not isinstance(c, Mapping):
            raise _topology_error(path, f"{where}: expected a mapping, got {c!r}")
        extra = sorted(set(c) - {"name", "replicas", "arrival_rate", "service"})
        if extra:
            raise _topology_error(path, f"{where}: unknown field(s) {extra}")
        for key in ("name", "replicas", "arrival_rate", "service"):
            if key not in c:
                raise _topology_error(path, f"{where}: missing field {key!r}")
        name = c["name"]
        if isinstance(name, str) and name:
            where = f"cells[{j}] ({name})"
        try:
            service = model_from_dict(c["service"], where=f"{where}.service")
        except ModelError as exc:
            raise ModelError(f"{path}: {exc}" if path else str(exc)) from None
        _check_service_parameters(c["service"], where, path)
        cells.append(Cell(name=name, replicas=c["replicas"], arrival_rate=c["arrival_rate"],
                          service=service))
    arcs = []
    for a_i, a in enumerate(data["arcs"]):
        where = f"arcs[{a_i}]"
        if not isinstance(a, Mapping):
            raise _topology_error(path, f"{where}: expected a mapping, got {a!r}")
        extra = sorted(set(a) - {"from", "to", "delay"})
        if extra:
            raise _topology_error(path, f"{where}: unknown field(s) {extra}")
        for key in ("from", "to"):
            if key not in a:
                raise _topology_error(path, f"{where}: missing field {key!r}")
        for key in ("from", "to"):
            if not isinstance(a[key], str):
                raise _topology_error(path, f"{where}.{key}: expected a cell name (a string), "
                                            f"got {a[key]!r}")
        # replicas, arrival rates and delays are checked by CellNetwork (the one validator)
        arcs.append(Arc(source=a["from"], target=a["to"], delay=a.get("delay", 0.0)))
    try:
        net = CellNetwork(cells, arcs)
    except (TopologyError, ModelError) as exc:
        raise type(exc)(f"{path}: {exc}" if path else str(exc)) from None
    _warn_long_delays(net, path)
    return net


#: An arc delay above this (s) is probably milliseconds written as seconds: a warning.
LONG_DELAY_S = 10.0


def _warn_long_delays(net: Any, path: str) -> None:
    """One :class:`~lbtheory.errors.SuspiciousInputWarning` when arcs have one-way delays above
    :data:`LONG_DELAY_S` (delays are read in seconds; ``delay: 15`` meant as 15 ms is 15 s)."""
    import warnings

    from .errors import SuspiciousInputWarning

    long = [a for a in net.arcs if a.delay > LONG_DELAY_S]
    if not long:
        return
    a = max(long, key=lambda arc: arc.delay)
    more = f" (and {len(long) - 1} more arc{'s' if len(long) > 2 else ''} above " \
           f"{LONG_DELAY_S:g} s)" if len(long) > 1 else ""
    warnings.warn(f"{path + ': ' if path else ''}delays are in seconds; {a.delay:g} s read from "
                  f"arc {a.source}→{a.target}{more}; write milliseconds as e.g. 0.015",
                  SuspiciousInputWarning, stacklevel=3)


#: Largest configuration file read (bytes): topology and scenario files are hand-written.
MAX_CONFIG_BYTES = 64 * 2**20


def read_config_file(path: str | os.PathLike, what: str) -> Any:
    """The data of a YAML (``.yaml``/``.yml``/other) or JSON (``.json``) configuration file — the
    one reader of topology and scenario files.

    UTF-8 only (a UTF-8 byte-order mark is dropped; a UTF-16 file or binary data is named), at
    most :data:`MAX_CONFIG_BYTES`, YAML without anchors/aliases (a configuration never needs
    them, and nested aliases expand exponentially: the "billion laughs"), and a syntax error as
    one line with its line number.

    Raises:
        DataFormatError: any of the above (naming the file and line).
        OSError: the file cannot be read (missing, no permission).
    """
    import yaml

    from ._checks import check_path

    p = check_path(path, f"{what} path")
    kind = "JSON" if p.suffix.lower() == ".json" else "YAML"
    if p.is_dir():
        raise DataFormatError(f"expected a {what} file (.yaml/.yml/.json), got a directory",
                              path=str(p))
    if p.stat().st_size > MAX_CONFIG_BYTES:
        raise DataFormatError(f"the {what} file is {p.stat().st_size / 2**20:.0f} MiB, more "
                              f"than the {MAX_CONFIG_BYTES / 2**20:.0f} MiB a configuration "
                              f"file may have", path=str(p))
    raw = p.read_bytes()
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise DataFormatError("the file is UTF-16 (it starts with a UTF-16 byte-order mark); "
                              "save it as UTF-8", path=str(p))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataFormatError(f"not a text file: byte {exc.start} is not UTF-8; expected a "
                              f"YAML or JSON {what}", path=str(p)) from None
    if "\x00" in text:
        raise DataFormatError(f"not a text file: it contains a NUL byte; expected a YAML or JSON "
                              f"{what}", path=str(p))
    try:
        return json.loads(text) if kind == "JSON" else yaml.load(text, Loader=_NoAliasLoader)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        line = getattr(exc, "lineno", None)
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            line = mark.line + 1
        problem = getattr(exc, "problem", None) or getattr(exc, "msg", None) or str(exc)
        raise DataFormatError(f"not valid {kind}: {' '.join(str(problem).split())}",
                              path=str(p), line=line) from None


def _no_alias_loader() -> Any:
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        """PyYAML's safe loader, refusing anchors and aliases."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.MarkedYAMLError(problem="YAML aliases (*name) are not accepted in a "
                                                   "configuration file; write the value out",
                                           problem_mark=event.start_mark)
            return super().compose_node(parent, index)

    # YAML 1.2 floats: PyYAML (YAML 1.1) reads ``1e-3`` (no dot) as the text "1e-3"; a number
    # check then refuses text, so the file's number is read as the number it is
    import re

    NoAliasLoader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"))
    return NoAliasLoader


class _LazyLoader:
    """The alias-refusing loader class, built on first use (no PyYAML import at start-up)."""

    cls: Any = None

    def __call__(self, stream: Any) -> Any:
        if _LazyLoader.cls is None:
            _LazyLoader.cls = _no_alias_loader()
        return _LazyLoader.cls(stream)


_NoAliasLoader = _LazyLoader()


def load_topology(path: str | os.PathLike):
    """Read a topology file (``.yaml``/``.yml`` or ``.json``) into a CellNetwork.

    A scenario file is a topology file too: its ``simulation:`` section (read by
    :func:`lbtheory.sim.load_scenario`) is ignored here, so ``equilibrium``, ``stepsize``,
    ``fluid`` and ``simulate`` all run on the same file.
    """
    data = read_config_file(path, "topology")
    if isinstance(data, Mapping) and "simulation" in data:
        data = {k: v for k, v in data.items() if k != "simulation"}
    return topology_from_dict(data, path=str(path))


def topology_to_dict(net) -> dict[str, Any]:
    """Inverse of :func:`topology_from_dict`."""
    from .models import model_to_dict

    return {
        "cells": [{"name": c.name, "replicas": c.replicas, "arrival_rate": c.arrival_rate,
                   "service": model_to_dict(c.service)} for c in net.cells],
        "arcs": [{"from": a.source, "to": a.target, "delay": a.delay} for a in net.arcs],
    }
