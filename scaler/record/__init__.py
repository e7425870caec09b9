"""The written trace: a record per decision change, the log that rotates them, `scaler explain`."""
