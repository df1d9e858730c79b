"""`testtime serve`: an OpenAI-compatible endpoint that answers each chat request with a test-time method.

`protocol` reads requests (the method from the model-name prefix or a `testtime` body field) and writes
chat completions; `session` answers one request as one problem through the run's engine and records it;
`app` is the HTTP server, `limits` what a client may ask, `server` opens and closes a served run. A served
run is a run directory like any other (`kind: served` in its manifest), so `testtime view` reads it, while
it serves too. This package's own import is light: the CLI reads `limits` for its defaults.
"""
