"""`stortune recommend` writes files a person installs as written, and says what to do: the
system's own parsers read them back (findmnt, sysctl, systemd-tmpfiles on a scratch root,
mkfs on a scratch image, udevadm where present), only values away from the defaults appear,
and the verdict follows the verified gain: an open one writes no files unless asked."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import STORTUNE, stored_localfs_campaign

from stortune.store import Store


def stortune(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*STORTUNE, *args], capture_output=True, text=True, timeout=300)


def stored(db: Path, changes: dict[str, object]) -> None:
    with Store(str(db)) as store:
        stored_localfs_campaign(store, "fs", changes, ("total.bw_mbs", "max"), (40.0, 50.0))


CHANGES = {
    "fs": "xfs",
    "atime": "noatime",
    "scheduler": "mq-deadline",
    "read_ahead_kb": 2048,
    "dirty_ratio": 40,
}


def install(db: Path, out: Path, *more: str) -> subprocess.CompletedProcess[str]:
    """`recommend --out-dir` on campaign fs, stored unverified: its verdict is MEASURE MORE, so
    the files are written only with --force."""
    return stortune("recommend", "fs", "--store", str(db), "--out-dir", str(out), *more)


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    db = tmp_path / "r.db"
    stored(db, CHANGES)
    done = install(db, tmp_path / "out", "--force")
    assert done.returncode == 0, done.stderr
    return tmp_path / "out"


def test_the_fstab_line_reads_back_with_findmnt(installed: Path) -> None:
    fstab = installed / "etc" / "fstab"
    parsed = subprocess.run(
        ["findmnt", "--fstab", "--tab-file", str(fstab), "-J",
         "-o", "SOURCE,TARGET,FSTYPE,OPTIONS,PASSNO"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    [entry] = json.loads(parsed.stdout)["filesystems"]
    assert entry["fstype"] == "xfs" and entry["options"] == "noatime"
    assert entry["passno"] == 0  # fsck.xfs does nothing: no boot-time check
    assert entry["source"].startswith("UUID=") and entry["target"].startswith("/")


def test_the_sysctl_file_is_in_sysctls_own_syntax(installed: Path) -> None:
    conf = installed / "etc" / "sysctl.d" / "90-stortune.conf"
    assert conf.read_text() == "vm.dirty_ratio = 40\n"
    parsed = subprocess.run(
        ["sysctl", "--dry-run", "-p", str(conf)], capture_output=True, text=True
    )  # parses the file and checks the key exists, writes nothing
    assert parsed.returncode == 0, parsed.stderr
    assert parsed.stdout.strip() == "vm.dirty_ratio = 40"


def test_the_tmpfiles_lines_write_the_queue_settings_on_a_scratch_root(
    installed: Path, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    queue = root / "sys" / "block" / "sdz" / "queue"
    queue.mkdir(parents=True)
    for attribute in ("scheduler", "read_ahead_kb"):
        (queue / attribute).write_text("")
    lines = (installed / "etc" / "tmpfiles.d" / "90-stortune.conf").read_text()
    conf = tmp_path / "90-stortune.conf"
    conf.write_text(lines.replace("DISK", "sdz"))
    subprocess.run(
        ["systemd-tmpfiles", "--create", f"--root={root}", str(conf)], check=True, timeout=60
    )
    assert (queue / "scheduler").read_text() == "mq-deadline"
    assert (queue / "read_ahead_kb").read_text() == "2048"


def udevadm_verifies() -> bool:
    """Whether `udevadm verify` exists: systemd 253 on (Debian 13); Debian 12's udev 252 has
    no verb that checks a rules file without applying rules to a device."""
    if shutil.which("udevadm") is None:
        return False
    probe = subprocess.run(["udevadm", "verify", "--help"], capture_output=True, timeout=60)
    return probe.returncode == 0


def test_the_udev_rule_sets_the_queue_of_the_disk(installed: Path) -> None:
    rule = installed / "etc" / "udev" / "rules.d" / "90-stortune.rules"
    assert rule.read_text() == (
        'ACTION=="add|change", SUBSYSTEM=="block", KERNEL=="DISK", '
        'ATTR{queue/scheduler}="mq-deadline", ATTR{queue/read_ahead_kb}="2048"\n'
    )


@pytest.mark.skipif(not udevadm_verifies(), reason="no `udevadm verify` (udev 253 or later)")
def test_the_udev_rule_verifies(installed: Path) -> None:
    rule = installed / "etc" / "udev" / "rules.d" / "90-stortune.rules"
    subprocess.run(["udevadm", "verify", str(rule)], check=True, timeout=60)


def test_mkfs_has_no_benchmark_flags_and_makes_the_file_system(
    installed: Path, tmp_path: Path
) -> None:
    script = (installed / "mkfs.sh").read_text()
    assert script.strip() == "mkfs.xfs /dev/DEVICE"  # no -f, -q, -K: a benchmark's own flags
    image = tmp_path / "scratch.img"
    with image.open("wb") as f:
        f.truncate(512 * 1024 * 1024)
    command = script.strip().replace("/dev/DEVICE", str(image)).split()
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    made = subprocess.run(
        ["blkid", "-o", "value", "-s", "TYPE", str(image)], capture_output=True, text=True
    )
    assert made.stdout.strip() == "xfs"


def test_only_the_values_away_from_the_defaults_appear(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    stored(db, {"atime": "noatime"})
    done = install(db, tmp_path / "out", "--force")
    assert done.returncode == 0, done.stderr
    files = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*"))
    assert [f for f in files if "." in f or f.endswith("fstab")] == ["etc/fstab"]
    assert "ext4  noatime  0  2" in (tmp_path / "out" / "etc" / "fstab").read_text()  # fsck'd
    assert "mkfs" not in done.stdout and "sysctl" not in done.stdout.split("==>", 1)[-1]
    assert "MEASURE MORE: not re-measured" in done.stdout  # one run each: measure first


def test_an_open_verdict_writes_no_files_unless_forced(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    stored(db, {"fs": "btrfs", "atime": "noatime"})
    out = tmp_path / "out"
    refused = install(db, out)
    assert refused.returncode == 0, refused.stderr
    assert "MEASURE MORE: not re-measured" in refused.stdout  # the recommendation is shown
    said = "not written: the verdict is MEASURE MORE; --force writes them anyway"
    assert said in refused.stdout.splitlines()
    assert not out.exists() or not any(out.iterdir())
    as_json = install(db, out, "--json")
    assert json.loads(as_json.stdout)["advice"] == "measure more"  # stdout is the JSON alone
    assert said in as_json.stderr
    assert not out.exists() or not any(out.iterdir())
    forced = install(db, out, "--force")
    assert forced.returncode == 0, forced.stderr
    assert "wrote 2 file(s) to install and a README" in forced.stdout
    assert (out / "etc" / "fstab").read_text().endswith("  btrfs  noatime  0  0\n")  # no fsck
    assert (out / "mkfs.sh").is_file() and (out / "README").is_file()


SPACE = "name: one\nparameters:\n  x: {type: int, low: 0, high: 9, default: 1}\n"


@pytest.mark.parametrize(
    ("bench", "advice", "says"),
    [
        (
            'print(json.dumps({"v": float(sys.argv[1])}))',
            "apply it",
            "APPLY IT: the best config re-measured",
        ),
        ('print(json.dumps({"v": 5.0}))', "keep the default", "KEEP THE DEFAULT: the best config"),
    ],
)
def test_the_verdict_follows_the_verified_gain(
    tmp_path: Path, bench: str, advice: str, says: str
) -> None:
    (tmp_path / "s.yaml").write_text(SPACE)
    (tmp_path / "b.py").write_text(f"import json, sys\n{bench}\n")
    db = tmp_path / "r.db"
    tuned = stortune(
        "tune", "-t", "command", "--command", f"{sys.executable} {tmp_path / 'b.py'} {{x}}",
        "-s", str(tmp_path / "s.yaml"), "-o", "v:max", "--tuner", "random", "--budget", "3",
        "-r", "1", "--verify", "3", "--seed", "2", "--store", str(db), "--name", "c", "-q",
    )  # fmt: skip
    assert tuned.returncode == 0, tuned.stderr
    assert says.split(":")[0] in tuned.stdout  # the tuning ends with the same verdict
    text = stortune("recommend", "c", "--store", str(db))
    assert says in text.stdout
    found = json.loads(stortune("recommend", "c", "--store", str(db), "--json").stdout)
    assert found["advice"] == advice
    if advice == "keep the default":
        assert "nothing to install" in text.stdout
