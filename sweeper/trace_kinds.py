"""The kinds of synthetic trace ``sweeper.traces.generate`` makes, in a module of their own
so that a command line can offer them without importing numba (traces.py compiles kernels)."""

KINDS = ("steady", "bursty", "slow-consumer", "slow-drain", "diurnal", "many-queues")
