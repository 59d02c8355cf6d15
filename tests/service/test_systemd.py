"""The unit files, checked by the real systemd tools."""

from __future__ import annotations

import difflib
import pathlib
import re
import subprocess

import pytest

from command import HANG, chunkd_command

pytestmark = pytest.mark.systemd

UNITS = pathlib.Path(__file__).resolve().parent.parent.parent / "systemd"
INSTALLED_AT = "/opt/chunkd/bin/chunkd"  # where README's install steps put the command


@pytest.mark.parametrize("unit", ["chunkd.service", "chunkd@.service"])
def test_systemd_analyze_verify_is_clean(unit, tmp_path):
    """verify insists that ExecStart exists: point it at the installed chunkd, change nothing
    else. A template is checked as an instance."""
    text = (UNITS / unit).read_text(encoding="utf-8")
    assert INSTALLED_AT in text
    name = unit.replace("@.", "@inbox.")
    (tmp_path / unit).write_text(text.replace(INSTALLED_AT, chunkd_command()), encoding="utf-8")
    target = tmp_path / unit if name == unit else tmp_path / name
    if name != unit:
        target.symlink_to(tmp_path / unit)
    result = subprocess.run(["systemd-analyze", "verify", str(target)],
                            capture_output=True, text=True, timeout=HANG)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


@pytest.mark.parametrize("unit", ["chunkd.service", "chunkd@inbox.service"])
def test_security_exposure_is_safe(unit, tmp_path):
    source = UNITS / unit.replace("@inbox.", "@.")
    (tmp_path / unit).symlink_to(source)
    result = subprocess.run(["systemd-analyze", "security", "--offline=true", str(tmp_path / unit)],
                            capture_output=True, text=True, timeout=HANG)
    score = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", result.stdout)
    assert score, result.stdout + result.stderr
    assert float(score.group(1)) <= 1.0 and score.group(2) == "SAFE"


def test_template_differs_from_the_unit_only_in_its_inbox():
    unit = (UNITS / "chunkd.service").read_text(encoding="utf-8").splitlines()
    template = (UNITS / "chunkd@.service").read_text(encoding="utf-8").splitlines()
    changed = [line for line in difflib.ndiff(unit, template) if line[:2] in ("- ", "+ ")]
    allowed = re.compile(r"^[-+] (#.*|Description=.*|RequiresMountsFor=.*|ExecStart=.*|"
                         r"EnvironmentFile=.*|ReadWritePaths=.*)$")
    assert all(allowed.match(line) for line in changed), changed


def _with_drop_in(unit: str, folder: pathlib.Path, drop_in: str = "embed.conf") -> pathlib.Path:
    """``unit`` (an instance of the template, for chunkd@) in ``folder`` with
    ``systemd/DROP_IN`` in its drop-in folder, where systemd looks for it beside the
    unit file; ExecStart at the installed chunkd."""
    source = UNITS / unit.replace("@inbox.", "@.")
    (folder / source.name).write_text(source.read_text(encoding="utf-8").replace(
        INSTALLED_AT, chunkd_command()), encoding="utf-8")
    drop_ins = folder / (source.name + ".d")
    drop_ins.mkdir()
    (drop_ins / drop_in).write_text((UNITS / drop_in).read_text(encoding="utf-8"),
                                    encoding="utf-8")
    if unit != source.name:
        (folder / unit).symlink_to(folder / source.name)
    return folder / unit


def verified_and_rated(target) -> subprocess.CompletedProcess:
    """``systemd-analyze verify`` finds nothing to say of the unit with its drop-in; its
    ``security`` report."""
    verified = subprocess.run(["systemd-analyze", "verify", str(target)],
                              capture_output=True, text=True, timeout=HANG)
    assert (verified.returncode, verified.stdout + verified.stderr) == (0, "")
    return subprocess.run(["systemd-analyze", "security", "--offline=true", str(target)],
                          capture_output=True, text=True, timeout=HANG)


@pytest.mark.parametrize("unit", ["chunkd.service", "chunkd@inbox.service"])
def test_the_embed_drop_in_verifies_and_keeps_the_unit_safe(unit, tmp_path):
    """docs/daemon.md's drop-in for a model in the daemon: verify is clean with it, it
    turns MemoryDenyWriteExecute off (security reports the setting as open: the drop-in
    was read) and the unit stays 0.2 SAFE, as the docs say."""
    target = _with_drop_in(unit, tmp_path)
    result = verified_and_rated(target)
    [setting] = [line for line in result.stdout.splitlines()
                 if "MemoryDenyWriteExecute=" in line]
    assert setting.startswith("✗") and "may create writable executable" in setting
    score = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", result.stdout)
    assert score and (score.group(1), score.group(2)) == ("0.2", "SAFE"), result.stdout
    daemon_md = (UNITS.parent / "docs" / "daemon.md").read_text(encoding="utf-8")
    assert "install -D -m 644 systemd/embed.conf /etc/systemd/system/chunkd.service.d/" in daemon_md


@pytest.mark.parametrize("unit", ["chunkd.service", "chunkd@inbox.service"])
def test_the_sink_drop_in_opens_only_tcp_and_keeps_the_unit_safe(unit, tmp_path):
    """docs/daemon.md's drop-in for a store or an endpoint over TCP: verify is clean with
    it, it was read (security reports Internet sockets allowed), the unit stays SAFE."""
    target = _with_drop_in(unit, tmp_path, "sink.conf")
    result = verified_and_rated(target)
    [setting] = [line for line in result.stdout.splitlines()
                 if "RestrictAddressFamilies=~AF_(INET|INET6)" in line]
    assert setting.startswith("✗")
    score = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", result.stdout)
    assert score and float(score.group(1)) <= 1.0 and score.group(2) == "SAFE", result.stdout
    daemon_md = (UNITS.parent / "docs" / "daemon.md").read_text(encoding="utf-8")
    assert "install -D -m 644 systemd/sink.conf /etc/systemd/system/chunkd.service.d/" in daemon_md
    assert "install -D -m 600 systemd/chunkd.env /etc/chunkd/chunkd.env" in daemon_md
