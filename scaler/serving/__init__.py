"""The live path: the gRPC server KEDA polls, the engine refreshing forecasts, the fit workers."""
