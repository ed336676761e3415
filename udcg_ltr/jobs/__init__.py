"""Job bodies behind the thin Hydra entry points (train.py, evaluate.py): config in, metrics out."""
