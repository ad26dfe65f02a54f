"""Concept figures drawn for the book with matplotlib (Japanese labels).

One module per chapter (``ch03``, ``ch04``, …), each with ``draw_*`` functions that
return a matplotlib Figure; chapters call them right before the formulas they
picture. Nothing here computes results: these are diagrams of architectures.
"""
