"""The knowledge's pictures and files: ``knowledge/assets/``, referred to from a document as ``assets/<name>``.

A file is served or stored only when its name stays inside the folder, its extension is one of ``KINDS`` and its
first bytes are that kind's (a renamed HTML page or script is refused), and it is no larger than the limit. SVG is
refused: it can carry script. Nothing here fetches anything remote.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from bot.errors import BotError
from bot.fsutil import commit_file, temp_beside

ASSET_DIR = "assets"  # under the knowledge folder
HEAD_BYTES = 16  # what the magic-byte check reads of a file


class AssetError(BotError):
    """An asset refused: a path that leaves the folder, an unknown or mismatched kind, a file over the limit."""


def _zip(head: bytes) -> bool:
    return head.startswith(b"PK\x03\x04")


def _webp(head: bytes) -> bool:
    return head[:4] == b"RIFF" and head[8:12] == b"WEBP"


def _starts(*magic: bytes) -> Callable[[bytes], bool]:
    return lambda head: head.startswith(magic)


@dataclass(frozen=True)
class Kind:
    """A kind of asset: its content type, whether it shows as a picture, and the test of its first bytes."""

    content_type: str
    image: bool
    matches: Callable[[bytes], bool]


_OFFICE = "application/vnd.openxmlformats-officedocument"
KINDS: dict[str, Kind] = {
    "png": Kind("image/png", True, _starts(b"\x89PNG\r\n\x1a\n")),
    "jpg": Kind("image/jpeg", True, _starts(b"\xff\xd8\xff")),
    "jpeg": Kind("image/jpeg", True, _starts(b"\xff\xd8\xff")),
    "gif": Kind("image/gif", True, _starts(b"GIF87a", b"GIF89a")),
    "webp": Kind("image/webp", True, _webp),
    "pdf": Kind("application/pdf", False, _starts(b"%PDF-")),
    "docx": Kind(f"{_OFFICE}.wordprocessingml.document", False, _zip),
    "xlsx": Kind(f"{_OFFICE}.spreadsheetml.sheet", False, _zip),
    "pptx": Kind(f"{_OFFICE}.presentationml.presentation", False, _zip),
}
ACCEPTED = ", ".join(f".{ext}" for ext in KINDS)
_NAME = re.compile(r"^[\w\u4e00-\u9fff][\w\u4e00-\u9fff.\-]*$")  # letters (Chinese too), digits, _ . -


def kind_of(name: str) -> Kind:
    """The kind a file name's extension says, or AssetError naming the accepted ones (SVG: why not)."""
    ext = PurePosixPath(name).suffix.lower().lstrip(".")
    if ext == "svg":
        raise AssetError(
            f"不接受 SVG（可能携带脚本），请转换为 PNG / SVG is not accepted (it can carry script); convert {name} to PNG"
        )
    kind = KINDS.get(ext)
    if kind is None:
        raise AssetError(f"不支持的文件类型 / Unsupported file type: {name} (accepted: {ACCEPTED})")
    return kind


def asset_name(reference: str) -> str | None:
    """The file name under ``assets/`` of a document's reference ``assets/<name>`` (None for any other link)."""
    prefix = f"{ASSET_DIR}/"
    return reference[len(prefix) :] if reference.startswith(prefix) else None


def check_name(name: str) -> PurePosixPath:
    """``name`` as a relative path inside the assets folder, or AssetError when it would leave it."""
    path = PurePosixPath(name)
    if not name or "\\" in name or path.is_absolute() or any(p in ("", ".", "..") for p in name.split("/")):
        raise AssetError(f"素材路径不能离开 assets 文件夹 / The asset path must stay inside assets/: {name!r}")
    if not all(_NAME.match(part) for part in path.parts):
        raise AssetError(
            f"素材名只能包含字母、数字、_ . - / An asset name may hold only letters, digits, _ . and -: {name!r}"
        )
    return path


@dataclass(frozen=True)
class Asset:
    """One checked asset file: where it is, its content type and size."""

    path: Path
    content_type: str
    size: int
    image: bool


class AssetStore:
    """The assets folder of one knowledge folder: files checked on the way in and on the way out."""

    def __init__(self, knowledge: Path, max_bytes: int):
        self.folder = Path(knowledge) / ASSET_DIR
        self.max_bytes = max_bytes

    def _limit(self, size: int, name: str) -> None:
        if size > self.max_bytes:
            mb = self.max_bytes / 1024 / 1024
            raise AssetError(f"文件超过 {mb:g} MB / {name} is over the {mb:g} MB limit (knowledge.assets.max_mb)")

    def checked(self, path: Path, name: str) -> Asset:
        """``path`` as an asset called ``name``: its kind from the name, confirmed by its first bytes, its size from
        the file system (a large file is never read), or AssetError."""
        kind = kind_of(name)
        size = path.stat().st_size
        self._limit(size, name)
        with path.open("rb") as f:
            head = f.read(HEAD_BYTES)
        if not kind.matches(head):
            raise AssetError(f"文件内容与扩展名不符 / The content of {name} is not a {PurePosixPath(name).suffix} file")
        return Asset(path, kind.content_type, size, kind.image)

    def find(self, name: str) -> Asset:
        """The asset ``name`` (relative to the assets folder), checked; AssetError when refused or missing."""
        relative = check_name(name)
        path = self.folder / relative
        resolved = path.resolve()
        if not resolved.is_relative_to(self.folder.resolve()):  # a link out of the folder
            raise AssetError(f"素材路径不能离开 assets 文件夹 / The asset path must stay inside assets/: {name!r}")
        if not resolved.is_file():
            raise FileNotFoundError(name)
        return self.checked(resolved, name)

    def exists(self, name: str) -> bool:
        """True when ``name`` is an asset that would be served."""
        try:
            self.find(name)
        except (AssetError, OSError):
            return False
        return True

    def save(self, source: Path, name: str) -> str:
        """Store the file ``source`` as ``assets/<name>`` (replacing one of that name); the reference a document
        uses for it. AssetError, with nothing written, when it is refused."""
        relative = check_name(PurePosixPath(name).name)
        self.checked(source, str(relative))
        target = self.folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_beside(target)
        try:
            shutil.copyfile(source, tmp)
            commit_file(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return f"{ASSET_DIR}/{relative}"
