"""The simulator stage: a discrete-event simulation of one training step
(numba kernel), its result, and a lower bound on any placement's step time.
"""
