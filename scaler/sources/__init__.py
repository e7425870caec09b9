"""Load sources behind one small interface (`base.Source`): Prometheus and CSV replay."""
