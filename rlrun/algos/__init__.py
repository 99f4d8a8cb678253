"""Algorithms: one module each, holding its agent (root component) and its plan (``training_step``)."""
