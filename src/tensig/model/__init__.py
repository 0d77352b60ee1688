"""The model layer: lazy tensors in a shape graph, the IR of assignments with their derivatives,
compilation to routines, training, checkpoints and data-parallel replicas.
"""
