"""The build tier: the recorder and the command line (record, verify, serve, checkpoints)."""
