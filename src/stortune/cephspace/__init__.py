"""Automated parameter-space cleaning for Ceph (SAPPHIRE section 3.2), from Ceph's own metadata.

Lives beside `stortune.spaces` (which holds only YAML files) rather than in it. The steps:

1. `metadata.read_options`: every option with ``ceph config ls`` and ``ceph config help NAME``
   (type, level, default, min, max, enum values, flags, services, tags); optionally
   `metadata.probe_observed` asks live daemons which runtime changes they observe.
2. `rules`: wash out what must not be tuned, prune what this deployment does not use.
3. `params`: one parameter per kept option: type, bounds (declared or default-relative and
   extendable), the daemon that reads it, what applying a change costs.
4. `constraints`: value constraints (SAPPHIRE Table 1) and activation conditions.
5. `generate.generate_space`: all of it, plus a summary by reason (`Cleaning`).

``stortune ceph space --out FILE`` runs it against a throwaway local cluster (or an existing one)
and writes the YAML; the bundled ``ceph`` space was made that way on Ceph 16.2.
"""

from stortune.cephspace.generate import Cleaning, generate_space

__all__ = ["Cleaning", "generate_space"]
