"""What talks to the machine: commands, sysfs and sysctl, mounts, mkfs, loop devices, the
device guard, cgroups, the restore journal, the benchmark lock, the environment, system metrics,
exporters and the disturbance checks. It imports nothing of the engine above it."""
