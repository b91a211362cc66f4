"""Charts: one module per view; each function takes a tidy frame and returns an altair chart."""

from __future__ import annotations

import sys


def skip_iri_grammar() -> None:
    """Keep ``jsonschema`` (imported by altair, nbformat and papermill) from compiling the IRI
    grammar of the optional ``rfc3987_syntax`` at import: seconds on a 2-core machine, for the
    ``iri`` format checks no chart or report uses (jsonschema leaves them unchecked)."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


skip_iri_grammar()
