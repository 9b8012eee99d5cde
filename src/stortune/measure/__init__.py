"""The measuring engine: every campaign's runs go through one runner with one set of rules.

- `runner`: executes a plan's visits (apply, run, record) with the failure, disturbance,
  busy-machine, time-budget and interrupt rules.
- plans: `tuning` (a tuner's asks), `sweeping` (a stored design; the noise study),
  `verify` (default, best and compared configs re-measured interleaved).
- `campaigns`: what a campaign stores, and how `--resume` rebuilds its plan; `lease`: one
  process measures a campaign at a time.
- `log`, `results`, `objective`: the campaign's record, the one rule that summarises a trial
  and picks the best, and what is optimised.
- the machine: `lock` (one benchmark at a time), `disturbance`, `environment`, `sysmetrics`,
  `reference` (drift correction), `noise` (how noisy is this machine).

Device profiling (`stortune.profile`) measures outside it on purpose: it has no config to apply
and times single requests per size on a file or device, with its own MPI workers.
"""
