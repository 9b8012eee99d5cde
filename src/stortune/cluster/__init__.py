"""Campaigns over many test nodes on Dask distributed: one coordinator proposes and stores, each
node (`stortune worker`) measures its own target. See docs/guides/cluster.md."""
