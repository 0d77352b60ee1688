"""Checking existing code: the runtime decorator, `verify` (a tracer over symbolic arrays with
one model per array library), findings, and test helpers.
"""
