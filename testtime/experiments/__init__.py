"""Jobs behind the commands: a single run (`run.py`), its display (`display.py`), and later sweeps."""
