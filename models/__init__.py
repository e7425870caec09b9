"""Forecasting: point forecasters, conformal calibration, backtests and artefacts.

Never imports `scaler`. `models.catalog` maps model names to adapters.
"""
