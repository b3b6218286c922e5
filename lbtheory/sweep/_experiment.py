"""The :class:`Experiment` record, grid validation, cache keys and experiment discovery.

An experiment is a grid of cells; each cell is a pure function of its JSON config. A cell's
result is cached under ``sha256`` of the canonical JSON of (experiment name, config, lbtheory
version), so changing any config field or the package version makes a new key.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SweepError
from ._validate import CellField

__all__ = ["Experiment", "canonical_json", "cache_key", "load_experiments",
           "discover_experiments", "select_experiments", "register_by_value"]

_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

Grid = Callable[[str], list]
Cell = Callable[[dict], dict]
Collect = Callable[[list, Path, str], None]


def canonical_json(obj: Any) -> str:
    """Canonical JSON text (sorted keys, no spaces, no NaN/inf) — the input of the cache key.

    Raises:
        TypeError / ValueError: ``obj`` is not plain JSON (callers turn this into SweepError).
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False,
                      ensure_ascii=False)


def _version() -> str:
    import lbtheory  # read at call time, so a monkeypatched version changes the key

    return str(lbtheory.__version__)


def cache_key(name: str, config: dict, version: str | None = None,
              experiment_version: str = "") -> str:
    """sha256 hex digest of the canonical JSON of ``{experiment, config, version}``.

    ``version`` defaults to ``lbtheory.__version__``; a non-empty ``experiment_version`` (an
    experiment's own code version, :attr:`Experiment.version`) is added to the hashed payload.
    """
    payload = {"experiment": name, "config": config,
               "version": _version() if version is None else version}
    if experiment_version:
        payload["experiment_version"] = experiment_version
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Experiment:
    """A sweep: a grid of JSON configs, a pure cell function and a summary writer.

    Attributes:
        name: CLI name, lowercase words joined by dashes (``"appendix-b-baseline"``), unique.
        description: one line, shown by ``lbtheory sweep --list``.
        grid: ``grid(profile) -> list[dict]``, one JSON-serialisable config per cell.
        cell: ``cell(config) -> dict``: pure, deterministic (seeds come from the config),
            module-level (picklable to Dask workers); returns a JSON-serialisable dict.
        collect: ``collect(rows, out_dir, profile)``: ``rows`` are ``(config, result)`` pairs in
            grid order; writes summary files (atomically) under ``out_dir`` = ``<results>/<name>``.
        profiles: profile names ``grid`` accepts; ``"quick"`` is the CI profile, ``"full"`` the
            real protocol and the default when listed.
        group: optional group name; ``lbtheory sweep GROUP`` runs every experiment of the group.
        version: optional code version of the cell function, part of the cache key: bump it
            when the cell's code changes its results (configs and the lbtheory version are
            always in the key; code in the experiment file is not, unless this is set).
        default: the profile a bare ``lbtheory sweep NAME`` and ``make experiments`` run
            (default ``"full"`` when listed, else the first profile). An experiment whose full
            protocol needs a cluster (DLB Appendix B: ≈38 h on 2 cores) names a smaller one here
            and keeps ``"full"`` for ``--profile full``.
        cell_schema: the top-level keys of a cell's result that ``collect`` reads, each a
            :class:`~lbtheory.sweep.CellField` (kind, bounds). Every result — read from the
            cache or just computed — must pass it and the generic checks of
            :func:`~lbtheory.sweep.check_result` (a JSON object, finite numbers); a cached
            result that does not is recomputed, a computed one is a failed cell.
    """

    name: str
    description: str
    grid: Grid
    cell: Cell
    collect: Collect
    profiles: tuple[str, ...] = ("quick", "full")
    group: str | None = None
    version: str = ""
    default: str | None = None
    cell_schema: Mapping[str, CellField] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise SweepError(f"experiment name {self.name!r}: expected lowercase words joined by "
                             f"dashes, e.g. 'appendix-b-baseline'")
        for field in ("grid", "cell", "collect"):
            if not callable(getattr(self, field)):
                raise SweepError(f"experiment {self.name!r}: field {field!r} must be callable, "
                                 f"got {type(getattr(self, field)).__name__}")
        profiles = self.profiles
        if isinstance(profiles, str) or not isinstance(profiles, Sequence) or not profiles:
            raise SweepError(f"experiment {self.name!r}: field 'profiles' must be a non-empty "
                             f"tuple of names, got {profiles!r}")
        object.__setattr__(self, "profiles", tuple(profiles))
        if not all(isinstance(p, str) and p for p in self.profiles):
            raise SweepError(f"experiment {self.name!r}: field 'profiles' must hold non-empty "
                             f"strings, got {self.profiles!r}")
        if len(set(self.profiles)) != len(self.profiles):
            raise SweepError(f"experiment {self.name!r}: duplicate name in 'profiles' "
                             f"{self.profiles!r}")
        if self.default is not None and self.default not in self.profiles:
            raise SweepError(f"experiment {self.name!r}: field 'default' must be one of its "
                             f"profiles {self.profiles!r}, got {self.default!r}")
        if not isinstance(self.version, str):
            raise SweepError(f"experiment {self.name!r}: field 'version' must be a string, got "
                             f"{self.version!r}")
        if self.cell_schema is not None and (
                not isinstance(self.cell_schema, Mapping)
                or not all(isinstance(k, str) and isinstance(v, CellField)
                           for k, v in self.cell_schema.items())):
            raise SweepError(f"experiment {self.name!r}: field 'cell_schema' must map result "
                             f"keys (str) to lbtheory.sweep.CellField, got {self.cell_schema!r}")
        if self.group is not None and (not isinstance(self.group, str)
                                       or not _NAME.match(self.group)):
            raise SweepError(f"experiment {self.name!r}: field 'group' must be lowercase words "
                             f"joined by dashes, got {self.group!r}")

    @property
    def default_profile(self) -> str:
        """``default`` when set, else ``"full"`` when the experiment has it, else its first."""
        if self.default is not None:
            return self.default
        return "full" if "full" in self.profiles else self.profiles[0]

    def configs(self, profile: str | None = None) -> list[dict]:
        """The validated grid of ``profile``: JSON-normalised configs (tuples become lists).

        Raises:
            SweepError: unknown profile, a grid that is not a non-empty list, a config that is
                not a JSON object, or two identical configs; the message names the experiment.
        """
        profile = self.default_profile if profile is None else profile
        if profile not in self.profiles:
            raise SweepError(f"experiment {self.name!r}: unknown profile {profile!r}; expected "
                             f"one of {', '.join(self.profiles)}")
        grid = _guarded(self.grid, f"experiment {self.name!r}: grid({profile!r})", profile)
        if not isinstance(grid, (list, tuple)):
            raise SweepError(f"experiment {self.name!r}: grid({profile!r}) must return a list "
                             f"of config dicts, got {type(grid).__name__}")
        if not grid:
            raise SweepError(f"experiment {self.name!r}: grid({profile!r}) is empty; expected "
                             f"at least one config")
        out, seen = [], {}
        for k, cfg in enumerate(grid):
            if not isinstance(cfg, dict):
                raise SweepError(f"experiment {self.name!r}: grid({profile!r})[{k}] must be a "
                                 f"dict, got {type(cfg).__name__}")
            try:
                text = canonical_json(cfg)
            except (TypeError, ValueError) as exc:
                raise SweepError(f"experiment {self.name!r}: grid({profile!r})[{k}] is not "
                                 f"plain JSON ({exc}); expected str keys and str/int/float/bool/"
                                 f"None/list/dict values, finite numbers") from None
            if text in seen:
                raise SweepError(f"experiment {self.name!r}: grid({profile!r})[{k}] duplicates "
                                 f"config [{seen[text]}] {text}; each cell must be distinct")
            seen[text] = k
            out.append(json.loads(text))
        return out


# ----------------------------------------------------------------------------- discovery
def register_by_value(directory: Path) -> None:
    """Pickle by value every loaded module whose file lies in ``directory``.

    Experiment files are loaded from a path, not installed: Dask workers (local processes or a
    remote cluster) cannot import them, so their functions travel by value (cloudpickle).
    """
    import cloudpickle

    directory = Path(directory).resolve()
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if not f or name == "__main__":
            continue
        try:
            inside = Path(f).resolve().parent == directory
        except OSError:  # pragma: no cover
            continue
        if inside:
            try:
                cloudpickle.register_pickle_by_value(mod)
            except ValueError:  # pragma: no cover - not in sys.modules under that name
                pass


def _guarded(fn: Any, what: str, *args: Any) -> Any:
    """``fn(*args)`` with an exception — or a ``sys.exit`` — in experiment code turned into a
    :class:`SweepError` naming ``what`` (the user sees one ``error:`` line, not a traceback or a
    silent exit 0)."""
    try:
        return fn(*args)
    except SweepError:
        raise
    except SystemExit as exc:
        raise SweepError(f"{what} called sys.exit({exc.code!r}); experiment code must return "
                         f"or raise") from None
    except Exception as exc:
        raise SweepError(f"{what} raised {type(exc).__name__}: {exc}") from exc


def load_experiments(path: str | Path) -> list[Experiment]:
    """Import one experiment file and return its ``EXPERIMENT`` or ``EXPERIMENTS``.

    Raises:
        SweepError: the file defines neither, or they are not :class:`Experiment` objects.
    """
    path = Path(path).resolve()
    modname = f"_lbtheory_experiment_{path.stem}"
    if modname in sys.modules and getattr(sys.modules[modname], "__file__", None) == str(path):
        mod = sys.modules[modname]
    else:
        spec = importlib.util.spec_from_file_location(modname, path)
        if spec is None or spec.loader is None:
            raise SweepError(f"{path}: cannot be imported as an experiment file")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[modname] = mod
        if str(path.parent) not in sys.path:  # sibling helper modules are importable (last,
            sys.path.append(str(path.parent))  # so they never shadow an installed package)
        try:
            spec.loader.exec_module(mod)
        except SweepError:
            del sys.modules[modname]
            raise
        except SystemExit as exc:
            del sys.modules[modname]
            raise SweepError(f"{path}: the experiment file called sys.exit({exc.code!r}) at "
                             f"import (guard a script's entry point with "
                             f"`if __name__ == \"__main__\":`)") from None
        except Exception as exc:
            del sys.modules[modname]
            raise SweepError(f"{path}: cannot import the experiment file "
                             f"({type(exc).__name__}: {exc})") from exc
        except BaseException as exc:  # KeyboardInterrupt & co raised by the file's own code
            del sys.modules[modname]
            raise SweepError(f"{path}: importing the experiment file raised "
                             f"{type(exc).__name__} (an interrupt raised by the file, or Ctrl-C "
                             f"while it was imported); nothing was run") from None
    register_by_value(path.parent)
    exps = getattr(mod, "EXPERIMENTS", None)
    if exps is None:
        one = getattr(mod, "EXPERIMENT", None)
        exps = [] if one is None else [one]
    exps = list(exps)
    if not exps:
        raise SweepError(f"{path}: defines neither EXPERIMENT nor EXPERIMENTS")
    for e in exps:
        if not isinstance(e, Experiment):
            raise SweepError(f"{path}: EXPERIMENT(S) must be lbtheory.sweep.Experiment objects, "
                             f"got {type(e).__name__}")
    return exps


def discover_experiments(directory: str | Path = "experiments") -> dict[str, Experiment]:
    """Every experiment defined by ``directory/*.py`` (files starting with ``_`` are helpers),
    by name, sorted by name.

    Raises:
        SweepError: the directory does not exist, or two experiments share a name.
    """
    d = Path(directory)
    if not d.is_dir():
        raise SweepError(f"--experiments-dir {str(d)!r}: not a directory; expected a folder of "
                         f"experiments/*.py files")
    found: dict[str, Experiment] = {}
    where: dict[str, Path] = {}
    for f in sorted(d.glob("*.py")):
        if f.name.startswith("_"):
            continue
        for e in load_experiments(f):
            if e.name in found:
                raise SweepError(f"experiment name {e.name!r} is defined twice: {where[e.name]} "
                                 f"and {f}")
            found[e.name], where[e.name] = e, f
    return dict(sorted(found.items()))


def select_experiments(known: dict[str, Experiment], name: str) -> list[Experiment]:
    """The experiment called ``name``, or every experiment of group ``name`` (``"all"``: all).

    Raises:
        SweepError: neither an experiment nor a group; the message lists the known names.
    """
    if name in known:
        return [known[name]]
    group = [e for e in known.values() if e.group == name]
    if group:
        return group
    if name == "all" and known:
        return list(known.values())
    groups = sorted({e.group for e in known.values() if e.group})
    raise SweepError(f"unknown experiment or group {name!r}; known experiments: "
                     f"{', '.join(known) or '(none)'}"
                     + (f"; groups: {', '.join(groups)}" if groups else ""))
