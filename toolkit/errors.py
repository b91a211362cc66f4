"""The error types ppscope raises; everything else is a bug."""

from __future__ import annotations

from pathlib import Path


class ToolkitError(Exception):
    """Base of every error ppscope raises on purpose."""


class UnknownFormat(ToolkitError):
    """A file whose content matches no format ppscope reads."""

    def __init__(self, path: str | Path, reason: str = "unrecognized format") -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class UnsupportedCompression(UnknownFormat):
    """A compressed file or archive of a kind ppscope does not open (lz4, 7z, zip, a tar)."""

    def __init__(self, path: str | Path, kind: str, hint: str = "") -> None:
        self.kind = kind
        reason = f"{kind} is not supported (ppscope reads plain text, gzip, zstd, xz and bzip2)"
        super().__init__(path, reason + (f"; {hint}" if hint else ""))


class ParseError(ToolkitError):
    """A line that could not be read, with its location: ``path:line: reason`` then the line."""

    def __init__(
        self,
        path: str | Path,
        lineno: int | None,
        reason: str,
        line: str | None = None,
    ) -> None:
        self.path = str(path)
        self.lineno = lineno
        self.reason = reason
        self.line = line
        where = self.path if lineno is None else f"{self.path}:{lineno}"
        text = f"{where}: {reason}"
        if line is not None:
            text += "\n    " + shorten(line)
        super().__init__(text)


class CaptureError(ToolkitError):
    """A capture that cannot start or go on: an unreachable server, a missing program."""


class ConfigError(ParseError):
    """A ``run.toml`` that cannot be used: invalid TOML, an unknown key, a value of the wrong
    type or out of range; ``path:line: reason`` like ``ParseError`` (the line of the key)."""


def shorten(text: str, width: int = 160) -> str:
    """One line of at most ``width`` characters, for error messages."""
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= width else text[: width - 1] + "…"
