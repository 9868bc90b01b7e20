"""How to install an optional extra, said for where this copy of navi-core came from.

``pip install 'navi-core[chat]'`` only works for a copy installed from a package
index; a copy installed from a checkout, a wheel file or a VCS URL needs that source
named instead. pip records the source in the distribution's ``direct_url.json``
(PEP 610), which ``install_command`` reads; every missing-extra hint uses it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import orjson

if TYPE_CHECKING:
    from importlib import metadata

__all__ = ["DIST_NAME", "install_command"]

DIST_NAME = "navi-core"
"""The distribution's name on a package index."""

_HOME = Path(__file__).resolve().parents[1]
"""The folder ``navi_core`` was imported from: site-packages, or a checkout."""


def install_command(extra: str, dist: metadata.Distribution | None = None) -> str:
    """The pip command that adds ``extra`` to the installed navi-core.

    ``dist`` defaults to the installed distribution. From an index: ``pip install
    'navi-core[extra]'``; from a local folder: that folder (``-e`` when editable);
    from a VCS URL: ``'navi-core[extra] @ git+URL@commit'``; from a wheel or sdist
    file: that file while it exists, else the extra's own requirements.
    """
    if dist is None:
        dist = _installed()
        if dist is None:
            return _not_installed(extra)
    origin = _direct_url(dist)
    if origin is None:
        return _pip(f"{DIST_NAME}[{extra}]")
    url = str(origin.get("url", ""))
    vcs = origin.get("vcs_info")
    if isinstance(vcs, dict):
        commit = vcs.get("commit_id") or vcs.get("requested_revision")
        at = f"@{commit}" if commit else ""
        return _pip(f"{DIST_NAME}[{extra}] @ {vcs.get('vcs', 'git')}+{url}{at}")
    local = _local_path(url)
    dir_info = origin.get("dir_info")
    if isinstance(dir_info, dict) and local is not None:
        editable = "-e " if dir_info.get("editable") else ""
        return f"pip install {editable}{shlex.quote(f'{local}[{extra}]')}"
    if local is not None and local.is_file():
        return _pip(f"{local}[{extra}]")
    if local is None and url:  # an archive on the web: pip can fetch it again
        return _pip(f"{DIST_NAME}[{extra}] @ {url}")
    return _requirements(extra, dist)


def _installed() -> metadata.Distribution | None:
    """The distribution of the copy that runs, not whichever metadata is on sys.path.

    A checkout holds build metadata (``navi_core.egg-info``) that says nothing of how
    it was installed, and shadows the real record while the working directory is the
    checkout; so a checkout is matched to the install that points at it.
    """
    from importlib import metadata  # loaded only when a hint is needed

    if (_HOME / "pyproject.toml").is_file():
        for dist in metadata.distributions(name=DIST_NAME):
            origin = _direct_url(dist)
            path = _local_path(str(origin.get("url", ""))) if origin else None
            if path is not None and path.resolve() == _HOME:
                return dist
        return None
    return next(iter(metadata.distributions(name=DIST_NAME, path=[str(_HOME)])), None)


def _pip(requirement: str) -> str:
    return f"pip install {shlex.quote(requirement)}"


def _direct_url(dist: metadata.Distribution) -> dict[str, Any] | None:
    """``direct_url.json`` as a dict; None when installed from an index."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _local_path(url: str) -> Path | None:
    """The path of a ``file://`` URL; None for any other scheme."""
    parts = urlsplit(url)
    if parts.scheme != "file":
        return None
    return Path(unquote(parts.path))


def _not_installed(extra: str) -> str:
    """No install record: a checkout on ``PYTHONPATH`` is named, else the index."""
    if (_HOME / "pyproject.toml").is_file():
        return _pip(f"{_HOME}[{extra}]")
    return _pip(f"{DIST_NAME}[{extra}]")


_EXTRA_MARKER = re.compile(r"""\s*(?:and\s+)?extra\s*==\s*["']([^"']+)["']\s*""")


def _requirements(extra: str, dist: metadata.Distribution) -> str:
    """The extra's own requirements, for a copy whose source is gone."""
    wanted: list[str] = []
    for line in dist.requires or ():
        found = _EXTRA_MARKER.search(line)
        if found is None or found.group(1) != extra:
            continue
        rest = _EXTRA_MARKER.sub(" ", line).strip()
        requirement, _, marker = rest.partition(";")
        marker = re.sub(r"^and\s+|\s+and$", "", marker.strip())
        wanted.append(f"{requirement.strip()}; {marker}" if marker else requirement)
    if not wanted:
        return _pip(f"{DIST_NAME}[{extra}]")
    return "pip install " + " ".join(shlex.quote(r.strip()) for r in wanted)
