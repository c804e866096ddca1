"""Private implementation of :mod:`openmle.gym.service` (the sandbox job service)."""
