"""Kubernetes: ScaledObject manifests and discovery, the model store's ConfigMaps, Events.

The one home of the `kubernetes` client (tests/unit/test_architecture.py)."""
