"""testtime: make a language model better at a set of problems at test time, without labels.

Importing the package is cheap on purpose: torch, transformers and litellm are imported only by the
backends that need them, so `testtime --help` and the fake model stay fast.
"""

__version__ = "0.1.0"
