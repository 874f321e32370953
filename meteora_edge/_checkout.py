"""From a source checkout, ``meteora_edge.cli`` and ``meteora_edge.export`` are the top-level
``cli/`` and ``export/`` folders, and nothing else of the checkout is part of the package.

An installed wheel holds both inside the package (pyproject's ``package-dir`` mapping). A checkout
keeps them beside ``meteora_edge/``; importing from the repository root (``python -m meteora_edge``,
``PYTHONPATH=.``) must still find them. :func:`add_stage_folders` appends one entry to the package's
``__path__`` that names exactly those two folders, and registers a path hook that turns the entry
into a finder for them alone. Appending the checkout root instead would make ``tests``,
``benchmarks`` and ``meteora_edge`` itself subpackages of ``meteora_edge`` (a package walk then never
ends); appending ``cli/`` would make ``cli``'s modules (``main``, ``output`` …) modules of
``meteora_edge``. With this entry ``pkgutil.walk_packages`` lists ``meteora_edge.cli`` and
``meteora_edge.export`` as it does in a wheel.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator, MutableSequence
from importlib.machinery import ModuleSpec

PACKAGE = "meteora_edge"
FOLDERS = ("cli", "export")
_MARK = "::meteora_edge-stage-folders"  # never a folder, so no other path hook claims the entry


class StageFolders:
    """A path-entry finder that knows two subpackages of ``meteora_edge``: ``cli`` and ``export``."""

    def __init__(self, checkout: str) -> None:
        self.folders = {name: os.path.join(checkout, name) for name in FOLDERS}

    def find_spec(self, fullname: str, target: object = None) -> ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        folder = self.folders.get(name) if package == PACKAGE else None
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(fullname, os.path.join(folder, "__init__.py"),
                                                      submodule_search_locations=[folder])

    def iter_modules(self, prefix: str = "") -> Iterator[tuple[str, bool]]:
        """What ``pkgutil.iter_modules`` lists for this entry: both folders, as packages."""
        for name in sorted(self.folders):
            yield prefix + name, True

    def invalidate_caches(self) -> None:
        """Nothing is cached."""


def _hook(entry: str) -> StageFolders:
    if not entry.endswith(_MARK):
        raise ImportError("not a meteora_edge checkout entry")
    return StageFolders(entry[: -len(_MARK)])


def add_stage_folders(package_path: MutableSequence[str], package_dir: str) -> None:
    """Map ``cli/`` and ``export/`` beside ``package_dir`` into the package, when it sits in a checkout.

    Does nothing in an installed package (``cli`` is inside it) or outside a checkout (no
    ``cli/main.py`` or no ``pyproject.toml`` beside it).
    """
    checkout = os.path.dirname(package_dir)
    if os.path.isdir(os.path.join(package_dir, "cli")) or not (
            os.path.isfile(os.path.join(checkout, "cli", "main.py"))
            and os.path.isfile(os.path.join(checkout, "pyproject.toml"))):
        return
    if _hook not in sys.path_hooks:
        sys.path_hooks.insert(0, _hook)
    entry = checkout + _MARK
    sys.path_importer_cache.pop(entry, None)  # a cached None from before the hook existed
    if entry not in package_path:
        package_path.append(entry)
