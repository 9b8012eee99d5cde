"""Storage device profiling after SeRRa: sequential-to-random throughput ratios of reads and
writes per request size, estimated from a few Monte Carlo sizes per interval with linear
models, or measured in full as the reference; serially or over MPI workers.

Modules: `design` (intervals, size picks, tasks), `measure` (fio runs), `model` (lines,
curves, ratios, the reference's stopping rule), `parallel` (serial and MPI runners),
`profiler` (a whole profile as a dict: `run_profile`), `compare` (estimate vs reference);
its figures are `stortune.plots.profile`. Nothing is imported here: an MPI worker imports only
`measure` and what it needs.
"""
