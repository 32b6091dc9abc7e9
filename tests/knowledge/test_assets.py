"""The knowledge's assets: names that stay in the folder, kinds confirmed by their first bytes, SVG refused, the size
limit read from the file system (a 1 GB file is refused without being read), and uploads stored atomically."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from bot.knowledge.assets import AssetError, AssetStore

pytestmark = pytest.mark.unit

MB = 1024 * 1024


def png_bytes() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 3), "#f97316").save(out, format="PNG")
    return out.getvalue()


@pytest.fixture
def store(tmp_path: Path) -> AssetStore:
    (tmp_path / "knowledge" / "assets").mkdir(parents=True)
    return AssetStore(tmp_path / "knowledge", 1 * MB)


def upload(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / "uploads" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_png_is_stored_and_found_with_its_content_type(store, tmp_path):
    assert store.save(upload(tmp_path, "地图.png", png_bytes()), "地图.png") == "assets/地图.png"
    asset = store.find("地图.png")
    assert asset.content_type == "image/png" and asset.image and asset.size == len(png_bytes())
    assert store.exists("地图.png") and not store.exists("missing.png")


@pytest.mark.parametrize(
    "name, data, says",
    [
        ("logo.svg", b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>', "SVG"),
        ("map.png", b"<html><script>alert(1)</script></html>", "not a .png file"),
        ("form.pdf", png_bytes(), "not a .pdf file"),
        ("page.html", b"<html></html>", "Unsupported file type"),
        ("run.exe", b"MZ\x90\x00", "Unsupported file type"),
    ],
)
def test_a_refused_upload_says_why_and_writes_nothing(store, tmp_path, name, data, says):
    with pytest.raises(AssetError, match=says):
        store.save(upload(tmp_path, name, data), name)
    assert list(store.folder.iterdir()) == []


@pytest.mark.parametrize(
    "name", ["../config.yaml", "a/../../x.png", "/etc/passwd", "..", "a\\..\\b.png", ".hidden.png"]
)
def test_a_path_that_leaves_the_folder_is_refused(store, name):
    with pytest.raises(AssetError):
        store.find(name)


def test_a_link_out_of_the_folder_is_not_served(store, tmp_path):
    secret = tmp_path / "secret.png"
    secret.write_bytes(png_bytes())
    (store.folder / "link.png").symlink_to(secret)
    with pytest.raises(AssetError, match="inside assets"):
        store.find("link.png")


def test_a_1_gb_file_is_refused_by_its_size_without_being_read(store, tmp_path):
    big = tmp_path / "uploads" / "huge.png"
    big.parent.mkdir()
    with big.open("wb") as f:  # sparse: 1 GB on paper, nothing on disk
        f.write(png_bytes()[:16])
        f.truncate(1024 * MB)
    with pytest.raises(AssetError, match="over the 1 MB limit"):
        store.save(big, "huge.png")
    assert not (store.folder / "huge.png").exists()


def test_a_file_grown_past_the_limit_on_disk_is_no_longer_served(store):
    (store.folder / "map.png").write_bytes(png_bytes() + b"\0" * (2 * MB))
    with pytest.raises(AssetError, match="limit"):
        store.find("map.png")
