"""lgpatch: bring legacy deep-learning framework source trees back to life on new machines."""

__version__ = "0.1.0"
