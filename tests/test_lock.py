"""One benchmark at a time: a second campaign is refused with a clear line while one measures."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import tune

from stortune.errors import BusyError
from stortune.space import parse_space
from stortune.store import Store
from stortune.system.lock import BenchmarkLock
from stortune.targets.command import CommandTarget

HOLDER = textwrap.dedent(
    """\
    import sys, time
    from stortune.system.lock import BenchmarkLock
    with BenchmarkLock("campaign 'first'"):
        print("locked", flush=True)
        time.sleep(float(sys.argv[1]))
    """
)


def test_a_second_benchmark_is_refused_while_one_measures(tmp_path: Path) -> None:
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    holder = subprocess.Popen(
        [sys.executable, str(script), "30"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        space = parse_space("name: s\nparameters:\n  x: {type: int, low: 1, high: 3, default: 1}\n")
        with Store(str(tmp_path / "s.db")) as db:
            with pytest.raises(BusyError) as info:
                tune(db, "second", space, CommandTarget(command=["true"]), "m", budget=1)
            assert f"pid {holder.pid}, campaign 'first'" in str(info.value)
            assert "one at a time" in str(info.value)
            assert db.campaigns() == []  # refused before measuring, so not kept
    finally:
        holder.kill()
        holder.wait()
    # the kernel released the dead holder's lock: the next benchmark runs, and may nest it
    with BenchmarkLock("campaign 'third'"), BenchmarkLock("its target"):
        assert (
            "campaign 'third'"
            in (Path(os.environ["STORTUNE_LOCK_DIR"]) / "benchmark.lock").read_text()
        )
    with BenchmarkLock("campaign 'fourth'"):
        pass


@pytest.mark.parametrize("home", ["/proc/no-such-home", None])
def test_without_a_writable_home_the_lock_lives_in_the_temporary_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, home: str | None
) -> None:
    """A user whose HOME is unwritable or unset (a service account, `env -i`) still gets
    the lock, not a PermissionError from ~/.cache."""
    import pwd
    import tempfile

    from stortune.system.lock import lock_dir

    monkeypatch.delenv("STORTUNE_LOCK_DIR")
    monkeypatch.setattr(os, "geteuid", lambda: 4242)
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    if home is None:
        monkeypatch.delenv("HOME", raising=False)
        monkeypatch.setattr(pwd, "getpwuid", lambda uid: (_ for _ in ()).throw(KeyError(uid)))
    else:
        monkeypatch.setenv("HOME", home)
    assert lock_dir() == tmp_path / "stortune-4242"
    with BenchmarkLock("campaign 'service'"):
        assert "service" in (tmp_path / "stortune-4242" / "benchmark.lock").read_text()


def test_the_demo_without_root_home_or_a_writable_folder_is_one_line(tmp_path: Path) -> None:
    """A user who is not root, has no writable home and runs the demo where nothing may be
    written gets one line, not a traceback (as another user: uid 4242 stands in, since this
    interpreter may live where other users cannot reach)."""
    script = tmp_path / "demo.py"
    script.write_text(
        textwrap.dedent(
            """\
            import os
            os.geteuid = lambda: 4242
            from stortune.cli import main
            main(["demo"])
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STORTUNE_", "MPL"))}
    env["HOME"] = "/proc/no-such-home"
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd="/proc", env=env,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    # refused as the command line is read: the folder it would make is under /proc
    assert done.stderr.strip().splitlines() == [
        "error: Invalid value for '--out': output folder 'stortune-demo': under /proc, the "
        "kernel's files (see --help)"
    ]


def test_held_counts_takes_and_frees_on_the_last_release() -> None:
    from stortune.system.reentry import Held

    held: Held[str, int] = Held()
    made = []
    assert held.take("k", lambda: made.append(1) or 7) == 7
    assert held.take("k", lambda: made.append(2) or 8) == 7  # taken again: counted, not made
    assert made == [1]
    assert held.release("k") is None  # still held once
    assert list(held.values()) == [7]
    assert held.release("k") == 7  # the last release hands it back to be freed
    assert held.release("k") is None and list(held.values()) == []
