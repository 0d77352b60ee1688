"""Eager execution: the einsum family on NumPy, PyTorch, JAX and Dask arrays (`eager`), the
lowering of one assignment to backend calls (`lowering`), padded batches and prices.
"""
