"""Generated gRPC stubs for protos/externalscaler.proto. Never edit by hand: run ``make proto``."""
