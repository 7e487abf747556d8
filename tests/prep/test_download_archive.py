"""Safe tar extraction: members that escape the destination are refused, nothing is left behind."""

from __future__ import annotations

import io
import tarfile

import pytest

from genolong.prep.integrity import UnsafeArchiveError, safe_extract


def make_tar(path, members) -> None:
    """Write a .tar.gz with ``members``: (name, bytes) files or ready TarInfo objects."""
    with tarfile.open(path, "w:gz") as tar:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tar.addfile(member)
            else:
                name, data = member
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def link(name: str, target: str, kind=tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def test_a_clean_bundle_is_extracted(tmp_path):
    archive = tmp_path / "deepsea_train_bundle.v0.9.tar.gz"
    make_tar(
        archive,
        [
            ("deepsea_train/valid.mat", b"v" * 10),
            ("deepsea_train/test.mat", b"t" * 20),
            link("deepsea_train/latest.mat", "test.mat"),
        ],
    )
    files = safe_extract(archive, tmp_path / "bundle", progress=False)
    assert files == {"deepsea_train/valid.mat": 10, "deepsea_train/test.mat": 20}
    assert (tmp_path / "bundle/deepsea_train/latest.mat").read_bytes() == b"t" * 20


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([("ok.txt", b"1"), ("../evil.txt", b"x")], "climbs out with '..'"),
        ([("a/../../evil.txt", b"x")], "climbs out with '..'"),
        ([("/tmp/evil.txt", b"x")], "absolute path"),
        ([link("escape", "../../outside")], "symlink 'escape' -> '../../outside' points outside"),
        ([link("escape", "/etc")], "points outside"),
        ([link("d", "."), link("d/e", "..")], "points outside"),  # a chain of links climbing out
        ([link("hard", "../outside.txt", tarfile.LNKTYPE)], "hardlink 'hard'"),
        ([tarfile.TarInfo("dev")], None),
    ],
)
def test_unsafe_members_refuse_the_whole_archive(tmp_path, members, message):
    if message is None:  # a character device
        members[0].type, message = tarfile.CHRTYPE, "device file"
    archive = tmp_path / "bad.tar.gz"
    make_tar(archive, members)
    dest = tmp_path / "work" / "out"
    dest.parent.mkdir()
    with pytest.raises(UnsafeArchiveError, match=message):
        safe_extract(archive, dest, progress=False)
    assert list(dest.parent.iterdir()) == []  # nothing extracted, no temporary left
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "outside").exists()


def test_a_symlink_then_a_file_through_it_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    archive = tmp_path / "bad.tar.gz"
    make_tar(archive, [link("sub", str(outside)), ("sub/planted.txt", b"x")])
    with pytest.raises(UnsafeArchiveError):
        safe_extract(archive, tmp_path / "out", progress=False)
    assert list(outside.iterdir()) == []


def test_not_a_tarball_is_an_input_error(tmp_path):
    archive = tmp_path / "page.tar.gz"
    archive.write_text("<html>Not Found</html>")
    with pytest.raises(Exception, match="cannot unpack") as caught:
        safe_extract(archive, tmp_path / "out", progress=False)
    assert type(caught.value).__name__ == "InputError"
