"""Kubernetes: the one home of the `kubernetes` client (api.py: connection and errors;
configmaps.py; scaledobjects.py), and reading ScaledObject manifests into targets (targets.py;
the YAML itself, as kubectl reads it, in yamldocs.py)."""
