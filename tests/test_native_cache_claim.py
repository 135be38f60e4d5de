"""Processes building the same native library compile it once (``DiskCache.claim``): a node's ranks, or a
job's processes, meeting one library each wait for the first compile and read its entry. A stand-in compiler
that takes a second and counts its runs shows it in milliseconds of CPU."""

from __future__ import annotations

import importlib
import stat
import threading
from pathlib import Path

import pytest

B = importlib.import_module("opsmith.native.build")  # the module; opsmith.native.build is its function

SOURCE = "// a library's source\nnamespace opsmith { int f() { return %d; } }\n"


@pytest.fixture
def slow_cxx(tmp_path, monkeypatch):
    """A compiler that takes a second, writes its source as its ``-o`` file and counts those runs (not its version
    queries); it fails on a source holding ``#error``."""
    script = tmp_path / "slow-cxx"
    script.write_text('#!/bin/sh\ncase " $* " in *" -o "*) ;; *) echo "c++ (stand-in) 1"; exit 0;; esac\n'
                      'echo run >> "$0.runs"\nsleep 1\n'
                      'while [ "$1" != "-o" ]; do last="$1"; shift; done\n'
                      'if grep -q "#error" "$last"; then echo "ops.cpp:2: error: planted" >&2; exit 1; fi\n'
                      'cat "$last" > "$2"\n')  # fmt: skip
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("OPSMITH_CXX", str(script))
    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPSMITH_NATIVE_PCH", "off")
    monkeypatch.delenv("OPSMITH_DISABLE_DISK_CACHE", raising=False)
    return script


def _runs(cxx: Path) -> int:
    runs = Path(f"{cxx}.runs")
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def _build_together(source: str, outs: list[Path]) -> list:
    results: list = [None] * len(outs)

    def one(i: int) -> None:
        try:
            results[i] = B.compile_library(source, [], outs[i], dry_run=True)
        except Exception as e:
            results[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(outs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_builders_of_one_library_compile_it_once_and_each_gets_its_bytes(slow_cxx, tmp_path):
    outs = [tmp_path / f"lib{i}.so" for i in range(4)]
    results = _build_together(SOURCE % 1, outs)
    assert _runs(slow_cxx) == 1, results
    assert sorted(cached for cached, _ in results) == [False, True, True, True]
    assert len({p.read_bytes() for p in outs}) == 1 and b"return 1;" in outs[0].read_bytes()
    assert not list((tmp_path / "cache" / "native").glob(".lock-*"))  # no lock file is left behind
    # another library is another claim: it compiles, once
    assert _build_together(SOURCE % 2, outs[:2]) and _runs(slow_cxx) == 2


def test_a_failed_compile_releases_the_claim_and_each_builder_reports_it(slow_cxx, tmp_path):
    outs = [tmp_path / f"bad{i}.so" for i in range(2)]
    results = _build_together(SOURCE % 3 + "#error\n", outs)
    assert all(isinstance(r, B.ToolchainError) and "planted" in str(r) for r in results), results
    assert _runs(slow_cxx) == 2  # nothing was published: the waiter compiles (and fails) itself
    cached, _ = B.compile_library(SOURCE % 3, [], tmp_path / "good.so", dry_run=True)
    assert not cached and _runs(slow_cxx) == 3
