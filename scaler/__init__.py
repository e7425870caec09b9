"""Predictive GPU autoscaler: a KEDA external scaler that prewarms replicas from a calibrated
P95 forecast under a strict budget. See README.md and DESIGN.md."""

__version__ = "0.1.0"
