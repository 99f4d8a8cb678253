"""Metric sinks (TensorBoard, MLflow, console) behind one fan-out that every metric goes through."""
