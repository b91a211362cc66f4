"""Reports: sections, rendering, the offline bundle, redaction, provenance, widgets."""

from toolkit.chart import skip_iri_grammar

skip_iri_grammar()  # before anything here imports papermill, nbformat or altair
