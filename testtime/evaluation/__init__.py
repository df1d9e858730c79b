"""Evaluation: grading results against the sealed references (the only code besides the audits that reads
them), metrics and their intervals, the typed run summary, and TTRL's audit and compute accounting."""
