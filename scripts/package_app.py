"""The zip scripts/deploy.sh deploys: the files git tracks, less what .funcignore names (as azd and Core Tools leave
them out). Remote build installs requirements.txt on Azure, so no packages go in.

Usage: python3 scripts/package_app.py OUT.zip   (stdlib only: runs with any Python 3.11+)
"""

from __future__ import annotations

import fnmatch
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def ignore_patterns(root: Path = REPO) -> list[str]:
    lines = (root / ".funcignore").read_text().splitlines()
    return [line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith("#")]


def ignored(path: str, patterns: list[str]) -> bool:
    """gitignore-like for the patterns .funcignore uses: a pattern matches the path or any of its folders."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(
        fnmatch.fnmatch(p, pat) or fnmatch.fnmatch(part, pat) for pat in patterns for p, part in zip(prefixes, parts)
    )


def package_files(root: Path = REPO) -> list[str]:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    patterns = ignore_patterns(root)
    names = [name for name in tracked.decode().split("\0") if name]
    return sorted(name for name in names if not ignored(name, patterns) and (root / name).is_file())


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    files = package_files()
    with zipfile.ZipFile(argv[0], "w", zipfile.ZIP_DEFLATED) as archive:
        for name in files:
            archive.write(REPO / name, name)
    print(f"{argv[0]}: {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
