"""What every reader checks before it opens a file, and physical lines whatever the terminators.

``check_input`` rejects, with one line, what no format can be read from: a missing path, a
directory, a named pipe, a socket or a device (reading one would block or never end), and a
file this process may not read. Sniffers and loaders call it first, so no command hangs on a
FIFO or ends in a ``PermissionError`` traceback.

``split_lines`` cuts text into the file's physical lines: at ``\\n`` only, one trailing ``\\r``
taken off. ``str.splitlines`` also splits at ``\\r``, ``\\v``, ``\\f``, ``\\x1c``-``\\x1e``,
``\\x85``, U+2028 and U+2029, which would shift every line number after such a byte.
"""

from __future__ import annotations

import stat
from pathlib import Path

from toolkit.errors import ToolkitError, UnknownFormat
from toolkit.load import compression

__all__ = ["check_input", "head_lines", "split_lines"]

_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def check_input(path: str | Path) -> Path:
    """``path`` when it is a regular file this process can read.

    Raises
    ------
    ToolkitError
        The path does not exist, or is a directory.
    UnknownFormat
        A pipe, socket or device, or a file that cannot be opened for reading (permissions).

    Examples
    --------
    >>> check_input("/dev/null")
    Traceback (most recent call last):
    ...
    toolkit.errors.UnknownFormat: /dev/null: a character device, not a regular file
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ToolkitError(f"{path}: no such file") from None
    except PermissionError:
        raise UnknownFormat(path, "permission denied") from None
    except OSError as e:
        raise UnknownFormat(path, f"cannot read: {e.strerror or e}") from None
    if stat.S_ISDIR(mode):
        raise ToolkitError(f"{path}: a directory, not a file")
    for test, kind in _KINDS:
        if test(mode):
            raise UnknownFormat(path, f"{kind}, not a regular file")
    if not stat.S_ISREG(mode):
        raise UnknownFormat(path, "not a regular file")
    try:
        with path.open("rb"):  # opening a regular file never blocks
            pass
    except PermissionError:
        raise UnknownFormat(path, "permission denied") from None
    except OSError as e:
        raise UnknownFormat(path, f"cannot read: {e.strerror or e}") from None
    return path


def split_lines(text: str) -> list[str]:
    """The physical lines of ``text``: split at ``\\n``, one trailing ``\\r`` cut from each.

    A final line without ``\\n`` is a line; text ending in ``\\n`` has no empty last line.

    >>> split_lines("a\\r\\nb\\x0bc\\rd\\u2028e\\n\\nf")
    ['a', 'b\\x0bc\\rd\\u2028e', '', 'f']
    >>> split_lines("a\\r\\r\\n")
    ['a\\r']
    """
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def head_lines(path: str | Path, n: int = 400, max_bytes: int = 1 << 20) -> list[str]:
    """The first ``n`` physical lines of a file (decompressed), decoded leniently.

    A line cut by ``max_bytes`` is kept as far as it was read.

    Raises
    ------
    UnsupportedCompression
        A compression or archive ppscope does not read.
    """
    data = compression.head_bytes(path, max_bytes)
    return split_lines(data.decode("utf-8", "replace"))[:n]
