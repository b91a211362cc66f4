"""``python -m toolkit.synth [ROOT]``: (re)write the incident runs under ROOT (data/incident)."""

from __future__ import annotations

import sys

from toolkit.synth.runs import write_incident


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0].startswith("-")):
        print("usage: python -m toolkit.synth [ROOT]   (default: data/incident)", file=sys.stderr)
        return 2
    for path in write_incident(args[0] if args else "data/incident"):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
