"""`trt`: test-time recursive thinking — T rounds of K strategy-guided rollouts, label-free selection,
and reflection into a per-problem knowledge list. See method.py; prompts in prompts.py."""

from testtime.methods.trt import method  # noqa: F401 - registers the method
