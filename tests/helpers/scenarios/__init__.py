"""Scenario generator: complete SGLang run directories with known, injected causes.

``machine`` is the ground truth: a small serving machine in plain arithmetic (read its
docstring). Nothing here imports ``toolkit``: these runs test ppscope's diagnosis from outside.
"""
