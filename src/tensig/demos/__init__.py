"""Training demos of the model layer (run by ``make demo``)."""
