"""The model store: versioned artefacts per target and a champion pointer, shared by every
scaler replica and the retrain job (base.py: the interface; directory.py, configmap.py)."""
