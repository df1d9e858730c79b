"""The run floor: settings, the manifest, the run directory and its migrations, the one lifecycle (new,
resume, replay), building a run's parts, executing it, and grading predictions after the fact."""
