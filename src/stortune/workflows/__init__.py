"""What each command does, without the command line: tune (rank, tune, verify), rank a live
sample, sweep, the noise study, recommend and the demo. The CLI parses, calls one of these and
prints; tests and benchmarks call them directly."""
