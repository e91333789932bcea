"""Hand mutation testing: apply listed mutations one at a time, run the named tests, restore the file.

Usage::

    .venv/bin/python scripts/mutate.py scripts/mutations/follow.toml            # every mutation of the list
    .venv/bin/python scripts/mutate.py scripts/mutations/follow.toml -k backoff # those whose id contains "backoff"
    .venv/bin/python scripts/mutate.py scripts/mutations/*.toml --list           # show them, run nothing

A list (TOML) names its package, the tests that hold it, and its mutations::

    package = "shared/follow"
    tests = ["tests/collector/test_follow_plan.py"]

    [[mutation]]
    id = "backoff-uncapped"
    file = "shared/follow/plan.py"
    old = "return min(wait, RETRY_CAP)"
    new = "return wait"
    tests = ["..."]          # optional: these tests instead of the list's
    equivalent = "why"       # optional: a survivor shown to change nothing observable (reported apart)

``old`` must occur exactly once in ``file`` (give more context to make it so). A mutation is *caught* when the tests
fail (any non-zero pytest exit, a collection error included) or hang past ``--timeout``; it *survives* when they pass.
Before the mutations the tests are run once unmutated: they must pass, or nothing is reported. The file is restored
(bytes and modification time) after each run, also on Ctrl-C; bytecode is not written while a mutant is in place, so
a stale ``.pyc`` can never stand in for a mutant or for the restored file.

While a mutant is in place every test of the checkout sees it: to go on working meanwhile, run it in a copy
(``rsync -a --exclude .git ./ /tmp/mutants/ && cd /tmp/mutants && .venv/bin/python scripts/mutate.py ...``).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    package: str
    id: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    equivalent: str | None


def load(path: Path) -> list[Mutation]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    package = str(data["package"])
    default_tests = tuple(data.get("tests") or ())
    found: list[Mutation] = []
    seen: set[str] = set()
    for item in data.get("mutation") or []:
        mutation = Mutation(
            package=package,
            id=str(item["id"]),
            file=str(item["file"]),
            old=str(item["old"]),
            new=str(item["new"]),
            tests=tuple(item.get("tests") or default_tests),
            equivalent=item.get("equivalent"),
        )
        if mutation.id in seen:
            raise SystemExit(f"{path}: mutation id {mutation.id!r} twice")
        seen.add(mutation.id)
        if not mutation.tests:
            raise SystemExit(f"{path}: mutation {mutation.id!r} names no tests")
        found.append(mutation)
    return found


def check(mutation: Mutation) -> str | None:
    """Why the mutation cannot be applied (None: it can)."""
    source = (ROOT / mutation.file).read_text(encoding="utf-8")
    count = source.count(mutation.old)
    if count != 1:
        return f"'old' occurs {count} times in {mutation.file}"
    if mutation.old == mutation.new:
        return "'old' and 'new' are the same"
    return None


def run_tests(tests: tuple[str, ...], timeout: float) -> tuple[str, float]:
    """``passed``, ``failed`` or ``timeout``, and the seconds it took."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-n",
        "0",
        *tests,
    ]
    began = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - began
    return ("passed" if done.returncode == 0 else "failed"), time.monotonic() - began


def apply_and_run(mutation: Mutation, timeout: float) -> tuple[str, float]:
    path = ROOT / mutation.file
    original = path.read_bytes()
    stat = path.stat()
    try:
        text = original.decode("utf-8")
        path.write_text(text.replace(mutation.old, mutation.new, 1), encoding="utf-8")
        return run_tests(mutation.tests, timeout)
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lists", nargs="+", type=Path, help="mutation lists (TOML)")
    parser.add_argument("-k", dest="only", default="", help="only mutations whose id contains this")
    parser.add_argument("--list", action="store_true", help="print the mutations and check they apply; run nothing")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before a test run counts as a hang")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run (it passed already)")
    parser.add_argument("--tests", nargs="+", default=None, help="run these tests instead of the lists' (a new test)")
    parser.add_argument("--survivors", type=Path, default=None, help="only the ids an earlier run's log says survived")
    args = parser.parse_args(argv)
    # A kill restores the file like Ctrl-C does (the ``finally`` of the mutation running; the test run is killed).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    mutations = [m for path in args.lists for m in load(path) if args.only in m.id]
    if args.survivors is not None:
        log = " ".join(args.survivors.read_text(encoding="utf-8").split()) + " "
        mutations = [m for m in mutations if f"survived: {m.id} " in log or m.equivalent]
    if args.tests:
        mutations = [replace(m, tests=tuple(args.tests)) for m in mutations]
    problems = [(m, why) for m in mutations if (why := check(m)) is not None]
    for mutation, why in problems:
        print(f"CANNOT APPLY {mutation.package} {mutation.id}: {why}")
    if problems:
        return 2
    if args.list:
        for m in mutations:
            print(f"{m.package:28} {m.id:40} {m.file}")
        print(f"{len(mutations)} mutation(s)")
        return 0

    if not args.no_baseline:
        for tests in sorted({m.tests for m in mutations}):
            outcome, seconds = run_tests(tests, args.timeout)
            print(f"baseline {outcome} in {seconds:.0f}s: {' '.join(tests)}", flush=True)
            if outcome != "passed":
                print("the tests fail without a mutation: fix that first")
                return 2

    results: dict[str, list[tuple[Mutation, str]]] = {}
    for mutation in mutations:
        outcome, seconds = apply_and_run(mutation, args.timeout)
        verdict = "caught" if outcome != "passed" else ("equivalent" if mutation.equivalent else "SURVIVED")
        results.setdefault(mutation.package, []).append((mutation, verdict))
        print(f"{verdict:10} {seconds:5.0f}s {mutation.package} {mutation.id} ({outcome})", flush=True)

    print()
    print(f"{'package':28} caught / total (equivalent survivors apart)")
    for package, rows in results.items():
        caught = sum(1 for _, v in rows if v == "caught")
        equivalent = sum(1 for _, v in rows if v == "equivalent")
        survived = [m.id for m, v in rows if v == "SURVIVED"]
        print(f"{package:28} {caught} / {len(rows)}  (equivalent: {equivalent})")
        for name in survived:
            print(f"    survived: {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
