"""Loaders: one module per input format."""
