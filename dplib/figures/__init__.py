"""Figures and diagrams drawn for the chapters, one module per topic.

Each function returns a matplotlib ``Figure`` (or draws on given axes) from numbers computed by the
rest of ``dplib``: the pictures never carry a second copy of an algorithm.
"""
