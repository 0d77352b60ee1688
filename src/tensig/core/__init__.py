"""The core every other layer asks: the notation, symbolic dimensions, shapes, the solver and
shape inference. It imports nothing from the layers above it.
"""
