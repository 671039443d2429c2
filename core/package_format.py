"""The file format of AOT packages (polyduct.aot): one uncompressed zip archive.

Its first member, `polyduct-aot.json`, is the manifest: the format name and version, the runtime
the package was made for (polyduct, torch, Python, machine), the SHA-256 of every other member,
and the program's own data (`program`: what `polyduct.aot` needs to call it). A reader refuses a
package of another format version or runtime, one whose members differ from the manifest's list,
and one in which any member's SHA-256 differs (a damaged or edited file), each with a message
saying which.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import torch

from polyduct.errors import PackageError
from polyduct.version import __version__

FORMAT: Final = "polyduct-aot"
FORMAT_VERSION: Final = 1
MANIFEST: Final = "polyduct-aot.json"


def runtime_facts() -> dict[str, str]:
    """What a package's compiled files depend on (the launcher extension is built per Python)."""
    return {
        "polyduct": __version__,
        "torch": torch.__version__,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "machine": f"{sys.platform}-{platform.machine()}",
    }


def write_package(path: Path, program: Mapping[str, Any], members: Mapping[str, bytes]) -> Path:
    """Write the package atomically (a temporary file beside `path`, then renamed)."""
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "runtime": runtime_facts(),
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in sorted(members.items())},
        "program": dict(program),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as archive:
            archive.writestr(MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
            for name, data in sorted(members.items()):
                archive.writestr(name, data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def read_package(path: Path, facts: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The manifest and every member of the package at `path`, checked against `facts`."""
    try:
        with zipfile.ZipFile(path) as archive:
            manifest = _manifest(path, archive)
            _check_runtime(path, manifest, facts)
            return manifest, _members(path, archive, manifest["files"])
    except FileNotFoundError:
        raise PackageError(path, "no such file") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as e:
        raise PackageError(path, f"damaged or truncated ({type(e).__name__}: {e})") from None


def _manifest(path: Path, archive: zipfile.ZipFile) -> dict[str, Any]:
    try:
        manifest = json.loads(archive.read(MANIFEST))
    except KeyError:
        raise PackageError(
            path, f"no {MANIFEST}: damaged, truncated or not a polyduct AOT package"
        ) from None
    except ValueError as e:
        raise PackageError(path, f"damaged manifest ({e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise PackageError(path, f"not a polyduct AOT package (format {manifest.get('format')!r})")
    if manifest.get("version") != FORMAT_VERSION:
        raise PackageError(
            path,
            f"format version {manifest.get('version')!r}; this polyduct reads version "
            f"{FORMAT_VERSION} (package the program again with this polyduct)",
        )
    if not isinstance(manifest.get("files"), dict) or not isinstance(manifest.get("program"), dict):
        raise PackageError(path, "damaged manifest (no file list or program)")
    return manifest


def _check_runtime(path: Path, manifest: Mapping[str, Any], facts: Mapping[str, str]) -> None:
    made = manifest.get("runtime", {})
    for key, here in facts.items():
        if made.get(key) != here:
            raise PackageError(path, f"made for {key} {made.get(key)!r}, this is {key} {here!r}")


def _members(path: Path, archive: zipfile.ZipFile, files: Mapping[str, str]) -> dict[str, bytes]:
    names = set(archive.namelist()) - {MANIFEST}
    if names != set(files):
        missing, extra = sorted(set(files) - names), sorted(names - set(files))
        raise PackageError(path, f"damaged: members missing {missing}, unexpected {extra}")
    members = {}
    for name, digest in files.items():
        data = archive.read(name)
        if hashlib.sha256(data).hexdigest() != digest:
            raise PackageError(path, f"damaged: member {name!r} does not match its SHA-256")
        members[name] = data
    return members
