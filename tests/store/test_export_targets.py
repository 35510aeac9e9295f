"""`sweepkit export --out` never replaces what is not a regular file: links, FIFOs, devices, folders, sockets.

Real files of every kind on disk; exported files get the umask's permissions (or keep the replaced file's).
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from sweepkit.cli import main
from sweepkit.store import Warehouse


@pytest.fixture()
def wh(tmp_path) -> Warehouse:
    wh = Warehouse(tmp_path / "wh")
    wh.write_run(kind="trace", grid_name="g", grid_toml="", grid_sha256="a",
                 tables={"t": [pa.record_batch({"x": pa.array([1, 2], pa.int64())})]})
    return wh


def export(wh: Warehouse, out: Path | str, *args: str):
    return CliRunner().invoke(main, ["export", "v_decode", "--warehouse", str(wh.root), "--out", str(out), *args])


def test_a_new_file_gets_the_umask_permissions_and_a_replaced_file_keeps_its_own(wh, tmp_path):
    old = os.umask(0o027)
    try:
        res = export(wh, tmp_path / "new.parquet")
    finally:
        os.umask(old)
    assert res.exit_code == 0, res.output
    assert stat.S_IMODE((tmp_path / "new.parquet").stat().st_mode) == 0o640
    kept = tmp_path / "kept.csv"
    kept.write_text("an older export")
    kept.chmod(0o604)
    assert export(wh, kept, "--as", "csv").exit_code == 0
    assert stat.S_IMODE(kept.stat().st_mode) == 0o604 and kept.read_text().startswith('"run_id"')


def test_a_link_to_a_file_writes_its_target_and_stays_a_link(wh, tmp_path):
    target = tmp_path / "target.parquet"
    target.write_text("an older export")
    link = tmp_path / "link.parquet"
    link.symlink_to(target)
    res = export(wh, link)
    assert res.exit_code == 0, res.output
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert pq.read_table(target).num_rows == 0
    dangling = tmp_path / "dangling.parquet"
    dangling.symlink_to(tmp_path / "nothing")
    res = export(wh, dangling)
    assert res.exit_code == 2 and "link to nothing" in res.output and dangling.is_symlink()
    assert not (tmp_path / "nothing").exists()


def test_a_fifo_and_a_character_device_are_written_in_place_never_replaced(wh, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)     # a reader, so the writer does not block
    try:
        res = export(wh, fifo, "--as", "csv")
        assert res.exit_code == 0, res.output
        assert os.read(reader, 1 << 16).startswith(b'"run_id"')
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert export(wh, "/dev/null").exit_code == 0
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    if Path("/dev/full").exists():
        res = export(wh, "/dev/full")
        assert res.exit_code == 1 and "/dev/full" in res.output and "Traceback" not in res.output
        assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)
    assert not list(tmp_path.glob(".*.tmp")) and not list(Path("/dev").glob(".null.*.tmp"))


def test_a_folder_and_a_socket_are_refused_untouched(wh, tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    res = export(wh, folder)
    assert res.exit_code == 2 and "folder" in res.output, res.output
    sock_path = tmp_path / "s"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(sock_path))
        res = export(wh, sock_path)
        assert res.exit_code == 2 and "it is a socket" in res.output, res.output
        assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)
    finally:
        sock.close()
    res = export(wh, tmp_path / "no" / "such" / "folder.parquet")
    assert res.exit_code == 2 and "existing folder" in res.output
